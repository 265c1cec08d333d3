// A tiny HTTP server for tests on the real node (images/build.sh builds it static, CGO_ENABLED=0).
module capstan.dev/images/httpd

go 1.26.0
