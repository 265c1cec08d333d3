# capstan's container image: a static (musl) binary on distroless/static, non-root, no shell.
#   docker build -t capstan:dev .          (or: podman build -t capstan:dev .)
# See docs/deploy.md. Targets linux/amd64 and linux/arm64 (BuildKit sets TARGETARCH).

FROM docker.io/library/rust:1.95-bookworm AS build
ARG TARGETARCH
RUN apt-get update && apt-get install -y --no-install-recommends musl-tools && rm -rf /var/lib/apt/lists/*
RUN case "${TARGETARCH:-amd64}" in \
      amd64) echo x86_64-unknown-linux-musl ;; \
      arm64) echo aarch64-unknown-linux-musl ;; \
      *) echo "unsupported TARGETARCH ${TARGETARCH}" >&2; exit 1 ;; \
    esac > /rust-target && rustup target add "$(cat /rust-target)"
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY benches ./benches
RUN target="$(cat /rust-target)" \
 && cargo build --release --locked --bin capstan --target "$target" \
 && cp "target/$target/release/capstan" /capstan

# distroless/static: CA certificates, /etc/passwd with the nonroot user (65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /capstan /usr/local/bin/capstan
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/capstan"]
CMD ["controller", "--leader-elect"]
