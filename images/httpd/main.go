// httpd: a tiny HTTP server (and client) for the real node's tests.
//
//	httpd [-listen :8080] [-message TEXT]   serve: every path answers TEXT, the pod's name and the path;
//	                                        one log line at start and one per request
//	httpd -get URL [-cacert FILE] [-token FILE]
//	                                        fetch URL once, print the HTTP status line and the body, exit 0
//	                                        on a 2xx answer (e.g. a Service, or the API server with the pod's
//	                                        ServiceAccount token and CA)
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	listen := flag.String("listen", ":8080", "address to listen on")
	message := flag.String("message", "hello from capstan's test image", "first line of every answer")
	get := flag.String("get", "", "fetch this URL once and exit")
	cacert := flag.String("cacert", "", "with -get: CA certificates (PEM) to trust")
	token := flag.String("token", "", "with -get: a file whose content is sent as a bearer token")
	flag.Parse()
	log.SetFlags(0)
	if *get != "" {
		os.Exit(fetch(*get, *cacert, *token))
	}
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("httpd: %s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "%s\npod %s\npath %s\n", *message, host, r.URL.Path)
	})
	log.Printf("httpd: pod %s listening on %s", host, *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}

func fetch(url, cacert, token string) int {
	tr := &http.Transport{TLSClientConfig: &tls.Config{}}
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			log.Printf("httpd: %v", err)
			return 2
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tr.TLSClientConfig.RootCAs = pool
	}
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		log.Printf("httpd: %v", err)
		return 2
	}
	if token != "" {
		t, err := os.ReadFile(token)
		if err != nil {
			log.Printf("httpd: %v", err)
			return 2
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(t)))
	}
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		log.Printf("httpd: GET %s: %v", url, err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %s\n%s", resp.Proto, resp.Status, body)
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}
