//! OCI registry access: pull and push manifests and blobs, auth, plain HTTP for loopback, digest cache.
