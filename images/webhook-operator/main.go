// webhook-operator: the test operator of capstan's webhook support. It serves, over
// TLS with the certificate OLM (here capstan) mounts at /tmp/k8s-webhook-server/serving-certs:
//
//	/validate  a validating admission webhook (AdmissionReview v1) for Widgets: a Widget whose
//	           spec.replicas (v1) or spec.size (v1alpha1) is above 10 is rejected with the
//	           message "widget NAME: replicas N is over the limit of 10"
//	/convert   a conversion webhook (ConversionReview v1) between widgets.webhook.capstan.dev
//	           v1alpha1 (spec.size) and v1 (spec.replicas)
//	/healthz   200 "ok", or 503 with -never-ready (the failure case of the tests) and while draining
//
// On SIGTERM it drains as a webhook server must during a rolling update: /healthz answers 503,
// keep-alives are turned off (each answer closes its connection, so no client reuses one to a
// server about to go), and it keeps serving for -drain (5 s) while the endpoint is taken out of the
// Service, then shuts down once the requests in flight are answered. Exiting at once would reset
// the connections the API server still opens to this pod's address (seen in the upgrade test).
//
// The key pair is read again on every TLS handshake, so a rotated Secret is served without a
// restart. Standard library only; built with CGO_ENABLED=0 into a static binary.
package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

const limit = 10

type admissionReview struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Request    *admissionRequest  `json:"request,omitempty"`
	Response   *admissionResponse `json:"response,omitempty"`
}

type admissionRequest struct {
	UID    string          `json:"uid"`
	Name   string          `json:"name"`
	Object json.RawMessage `json:"object"`
}

type status struct {
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Status  string `json:"status,omitempty"`
}

type admissionResponse struct {
	UID     string  `json:"uid"`
	Allowed bool    `json:"allowed"`
	Result  *status `json:"status,omitempty"` // admission.k8s.io/v1 AdmissionResponse.Result is "status"
}

type conversionReview struct {
	APIVersion string              `json:"apiVersion"`
	Kind       string              `json:"kind"`
	Request    *conversionRequest  `json:"request,omitempty"`
	Response   *conversionResponse `json:"response,omitempty"`
}

type conversionRequest struct {
	UID               string                   `json:"uid"`
	DesiredAPIVersion string                   `json:"desiredAPIVersion"`
	Objects           []map[string]interface{} `json:"objects"`
}

type conversionResponse struct {
	UID              string                   `json:"uid"`
	ConvertedObjects []map[string]interface{} `json:"convertedObjects"`
	Result           status                   `json:"result"`
}

func number(v interface{}) (int64, bool) {
	f, ok := v.(float64)
	return int64(f), ok
}

func validate(w http.ResponseWriter, r *http.Request) {
	var rev admissionReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 4<<20)).Decode(&rev); err != nil || rev.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	var obj struct {
		APIVersion string `json:"apiVersion"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Spec map[string]interface{} `json:"spec"`
	}
	resp := &admissionResponse{UID: rev.Request.UID, Allowed: true}
	if err := json.Unmarshal(rev.Request.Object, &obj); err == nil {
		n, ok := number(obj.Spec["replicas"])
		if !ok {
			n, ok = number(obj.Spec["size"])
		}
		if ok && n > limit {
			resp.Allowed = false
			resp.Result = &status{Code: 403, Status: "Failure",
				Message: fmt.Sprintf("widget %s: replicas %d is over the limit of %d", obj.Metadata.Name, n, limit)}
		}
	}
	log.Printf("validate %s: allowed=%v", obj.Metadata.Name, resp.Allowed)
	writeJSON(w, admissionReview{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview", Response: resp})
}

func convert(w http.ResponseWriter, r *http.Request) {
	var rev conversionReview
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&rev); err != nil || rev.Request == nil {
		http.Error(w, "not a ConversionReview", http.StatusBadRequest)
		return
	}
	out := make([]map[string]interface{}, 0, len(rev.Request.Objects))
	for _, o := range rev.Request.Objects {
		spec, _ := o["spec"].(map[string]interface{})
		if spec == nil {
			spec = map[string]interface{}{}
		}
		switch rev.Request.DesiredAPIVersion {
		case "webhook.capstan.dev/v1":
			if v, ok := spec["size"]; ok {
				spec["replicas"] = v
				delete(spec, "size")
			}
		case "webhook.capstan.dev/v1alpha1":
			if v, ok := spec["replicas"]; ok {
				spec["size"] = v
				delete(spec, "replicas")
			}
		}
		o["spec"] = spec
		o["apiVersion"] = rev.Request.DesiredAPIVersion
		out = append(out, o)
	}
	log.Printf("convert %d objects to %s", len(out), rev.Request.DesiredAPIVersion)
	writeJSON(w, conversionReview{APIVersion: "apiextensions.k8s.io/v1", Kind: "ConversionReview",
		Response: &conversionResponse{UID: rev.Request.UID, ConvertedObjects: out, Result: status{Status: "Success"}}})
}

func writeJSON(w http.ResponseWriter, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		log.Printf("write: %v", err)
	}
}

func main() {
	certDir := flag.String("cert-dir", "/tmp/k8s-webhook-server/serving-certs", "directory with tls.crt and tls.key")
	addr := flag.String("addr", ":9443", "listen address")
	neverReady := flag.Bool("never-ready", false, "answer /healthz with 503 forever")
	drain := flag.Duration("drain", 5*time.Second, "how long to keep serving after SIGTERM before shutting down")
	flag.Parse()
	var draining atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/validate", validate)
	mux.HandleFunc("/convert", convert)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if *neverReady {
			http.Error(w, "never ready", http.StatusServiceUnavailable)
			return
		}
		if draining.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok")
	})
	srv := &http.Server{Addr: *addr, Handler: mux, TLSConfig: &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(filepath.Join(*certDir, "tls.crt"), filepath.Join(*certDir, "tls.key"))
			if err != nil {
				return nil, err
			}
			return &c, nil
		},
	}}
	stopped := make(chan struct{})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
		<-sig
		log.Printf("draining for %s before shutting down", *drain)
		draining.Store(true)
		srv.SetKeepAlivesEnabled(false)
		time.Sleep(*drain)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			log.Printf("shutdown: %v", err)
		}
		close(stopped)
	}()
	log.Printf("serving %s with the certificate in %s", *addr, *certDir)
	if err := srv.ListenAndServeTLS("", ""); err != nil && err != http.ErrServerClosed {
		log.Print(err)
		os.Exit(1)
	}
	<-stopped
}
