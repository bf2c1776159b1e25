package service_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"github.com/groupstate/groupstate/runtime/internal/testutil"
	"github.com/groupstate/groupstate/runtime/service"
)

// startSecured starts a NATS server with opts applied (auth or TLS) on a random loopback port.
func startSecured(t *testing.T, configure func(o *server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true}
	configure(o)
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func TestConnectRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	testutil.Require(t, err)
	addr := l.Addr().String()
	l.Close()
	u := "nats://" + addr
	_, err = service.Connect(service.ConnOptions{URL: u, Logger: testutil.DiscardLogger()})
	if err == nil {
		t.Fatal("connected to a closed port")
	}
	if !strings.Contains(err.Error(), u) || !strings.Contains(err.Error(), "is groupstate serve running?") {
		t.Fatalf("error %q should name %s and hint at groupstate serve", err, u)
	}
}

func TestDefaultURL(t *testing.T) {
	t.Setenv("NATS_URL", "")
	if got := service.DefaultURL(); got != service.DefaultServerURL {
		t.Fatalf("DefaultURL() = %q", got)
	}
	t.Setenv("NATS_URL", "nats://example:4333")
	if got := service.DefaultURL(); got != "nats://example:4333" {
		t.Fatalf("DefaultURL() = %q with $NATS_URL", got)
	}
}

func TestConnectUserPassword(t *testing.T) {
	s := startSecured(t, func(o *server.Options) { o.Username, o.Password = "app", "s3cret" })
	if _, err := service.Connect(service.ConnOptions{URL: s.ClientURL(), Logger: testutil.DiscardLogger()}); err == nil {
		t.Fatal("connected without credentials")
	}
	nc, err := service.Connect(service.ConnOptions{URL: s.ClientURL(), User: "app", Password: "s3cret", Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	_, err = service.Connect(service.ConnOptions{URL: s.ClientURL(), User: "app", Password: "wrong", Logger: testutil.DiscardLogger()})
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Fatalf("wrong password: %v", err)
	}
}

// TestConnectLogsNoPassword: a password given in the server URL appears in no log line, on
// connection trouble (a disconnect) as on success.
func TestConnectLogsNoPassword(t *testing.T) {
	s := startSecured(t, func(o *server.Options) { o.Username, o.Password = "app", "hunter2-s3cret" })
	var logs syncBuffer
	url := strings.Replace(s.ClientURL(), "nats://", "nats://app:hunter2-s3cret@", 1)
	nc, err := service.Connect(service.ConnOptions{URL: url, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	testutil.Require(t, err)
	defer nc.Close()
	s.Shutdown()
	s.WaitForShutdown()
	testutil.Eventually(t, "the disconnect logged", func() bool { return strings.Contains(logs.String(), "disconnected from NATS") })
	if strings.Contains(logs.String(), "hunter2") {
		t.Fatalf("the password is in the log:\n%s", logs.String())
	}
	if _, err := service.Connect(service.ConnOptions{URL: url, Logger: testutil.DiscardLogger()}); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a failed connection's error shows the password: %v", err)
	}
}

func TestConnectNKey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	s := startSecured(t, func(o *server.Options) { o.Nkeys = []*server.NkeyUser{{Nkey: pub}} })
	nc, err := service.Connect(service.ConnOptions{URL: s.ClientURL(), NKeyFile: seedFile, Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	if _, err := service.Connect(service.ConnOptions{URL: s.ClientURL(), Logger: testutil.DiscardLogger()}); err == nil {
		t.Fatal("connected without the nkey")
	}
}

// TestConnectTLS: a server requiring TLS with client certificates; the client verifies the
// server with a CA file and presents its own certificate.
func TestConnectTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := newCert(t, nil, nil, "test CA", true)
	srvCert, srvKey := newCert(t, ca, caKey, "127.0.0.1", false)
	cliCert, cliKey := newCert(t, ca, caKey, "client", false)
	write := func(name string, blocks ...*pem.Block) string {
		var b []byte
		for _, bl := range blocks {
			b = append(b, pem.EncodeToMemory(bl)...)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", certBlock(ca))
	cliCertFile, cliKeyFile := write("client.pem", certBlock(cliCert)), write("client-key.pem", keyBlock(t, cliKey))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s := startSecured(t, func(o *server.Options) {
		o.TLS, o.TLSVerify = true, true
		o.TLSConfig = &tls.Config{
			Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
			ClientCAs:    pool,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		}
	})
	url := "tls://" + s.Addr().String()
	nc, err := service.Connect(service.ConnOptions{URL: url, TLSCA: caFile, TLSCert: cliCertFile, TLSKey: cliKeyFile, Logger: testutil.DiscardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := nc.TLSConnectionState(); err != nil || !st.HandshakeComplete {
		t.Fatalf("not connected over TLS: %v", err)
	}
	nc.Close()
	if _, err := service.Connect(service.ConnOptions{URL: url, TLSCA: caFile, Logger: testutil.DiscardLogger()}); err == nil {
		t.Fatal("connected without a client certificate")
	}
	if _, err := service.Connect(service.ConnOptions{URL: url, TLSCert: cliCertFile, TLSKey: cliKeyFile, Logger: testutil.DiscardLogger()}); err == nil {
		t.Fatal("connected without verifying the server")
	}
}

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, cn string, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:         isCA, BasicConstraintsValid: true,
	}
	if ip := net.ParseIP(cn); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func certBlock(c *x509.Certificate) *pem.Block { return &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw} }

func keyBlock(t *testing.T, k *ecdsa.PrivateKey) *pem.Block {
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
}
