// The test operator of capstan's webhook support (images/build.sh builds it static, CGO_ENABLED=0).
module capstan.dev/images/webhook-operator

go 1.26.0
