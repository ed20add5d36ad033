package integration_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redshard/redshard"
	"github.com/redshard/redshard/internal/redistest"
)

// TestTLSReachesEveryShard runs shards that only speak TLS on their TLS
// port and checks that ShardOptions.TLSConfig reaches every shard client
// (and the heartbeat's).
func TestTLSReachesEveryShard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	var shards []redshard.Shard
	for _, name := range []string{"a", "b"} {
		port := freeLoopbackPort(t)
		redistest.Start(t, redistest.Args("--tls-port", strconv.Itoa(port),
			"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-ca-cert-file", certFile,
			"--tls-auth-clients", "no"))
		shards = append(shards, redshard.Shard{Name: name, Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))})
	}
	events := make(chan redshard.ShardStateChange, 4)
	c, err := redshard.NewClient(&redshard.Options{
		Shards:       shards,
		ShardOptions: &redis.Options{TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
		// A generous timeout: a TLS handshake under -race on a loaded machine
		// can take tens of milliseconds.
		Health: &redshard.HealthOptions{Interval: 20 * time.Millisecond, Timeout: 2 * time.Second,
			OnShardStateChange: func(e redshard.ShardStateChange) { events <- e }},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.MSet(ctx, "k1", 1, "k2", 2, "k3", 3, "k4", 4, "k5", 5).Err(); err != nil {
		t.Fatalf("MSET over TLS: %v", err)
	}
	if n := c.DBSize(ctx).Val(); n != 5 {
		t.Fatalf("DBSIZE over TLS = %d", n)
	}
	// Several heartbeats later, no shard was marked down: they speak TLS too.
	time.Sleep(200 * time.Millisecond)
	select {
	case e := <-events:
		t.Fatalf("heartbeat over TLS failed: %+v", e)
	default:
	}
}

func freeLoopbackPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redshard test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}
