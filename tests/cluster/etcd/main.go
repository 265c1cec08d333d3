// Command etcd is the etcd server (go.etcd.io/etcd/server/v3/etcdmain), built from the version pinned
// in ../go.mod so that the test control plane does not depend on a distribution package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
