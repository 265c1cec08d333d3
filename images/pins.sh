# Pins of the images built by images/build.sh (sourced by it and by images/helm-operator.sh).
# The Go toolchain is pinned so that the Go binaries in the images (httpd, helm-operator) are the same
# bytes on every machine: the nginx-operator bundles name those images by digest.
IMAGES_GO=go1.26.8
# github.com/operator-framework/helm-operator-plugins: the Helm operator in the nginx-operator image.
HELM_OPERATOR_VERSION=v0.8.0
# github.com/grpc-ecosystem/grpc-health-probe: the readiness probe of the opm image (OLM's registry
# pods and its e2e suite's magic catalog run `grpc_health_probe -addr=:50051`).
GRPC_HEALTH_PROBE_VERSION=v0.4.63
