package main

import (
	"bytes"
	"context"
	"crypto"
	"encoding/base64"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci"
	ociempty "github.com/sigstore/cosign/v2/pkg/oci/empty"
	ocimutate "github.com/sigstore/cosign/v2/pkg/oci/mutate"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	sigs "github.com/sigstore/cosign/v2/pkg/signature"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

const chart = "winready-0.1.0.tgz"

// keyPair writes a cosign key pair, as cosign generate-key-pair does, into
// dir and returns the private key's file and the public key's PEM.
func keyPair(t *testing.T, dir, password string) (string, []byte) {
	t.Helper()
	keys, err := cosign.GenerateKeyPair(func(bool) ([]byte, error) { return []byte(password), nil })
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "cosign.key")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, keys.PrivateBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	return file, keys.PublicBytes
}

// release is a release with what the signer signs: the image index (a small
// two-platform one, pushed to an in-process registry as make publish pushes
// the release's), the chart package and SHA256SUMS.
type release struct {
	dist string
	repo name.Repository
	ref  name.Digest
}

func newRelease(t *testing.T, host string) release {
	t.Helper()
	dist := t.TempDir()
	idx, err := random.Index(512, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	h, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	repo, err := name.NewRepository(host + "/winready/winready")
	if err != nil {
		t.Fatal(err)
	}
	ref := repo.Digest(h.String())
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string]string{chart: "a chart package", "SHA256SUMS": "0000  install.yaml\n"} {
		if err := os.WriteFile(filepath.Join(dist, file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return release{dist: dist, repo: repo, ref: ref}
}

// sign runs the command as hack/release does, with the key in the
// environment.
func (r release) sign(t *testing.T, keyFile, password string, args ...string) error {
	t.Setenv("COSIGN_KEY", keyFile)
	t.Setenv("COSIGN_PASSWORD", password)
	return run(context.Background(), append([]string{"--dist", r.dist}, args...))
}

// pushSignature pushes the signature's layout as make publish does (crane
// push of a layout of one image pushes that image) to the tag its index
// names, and checks that this is the tag make publish computes from the
// digest.
func (r release) pushSignature(t *testing.T) {
	t.Helper()
	dir := filepath.Join(r.dist, SignatureLayout)
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("the signature's layout holds %d manifests, want 1 (crane push pushes a layout of one image as that image)", len(m.Manifests))
	}
	want := "sha256-" + strings.TrimPrefix(r.ref.DigestStr(), "sha256:") + ".sig"
	if got := m.Manifests[0].Annotations[refNameAnnotation]; got != want {
		t.Fatalf("the signature's layout names tag %q, want %q (the tag make publish pushes to)", got, want)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r.repo.Tag(want), img); err != nil {
		t.Fatal(err)
	}
}

// verifyImage is cosign verify --key KEY --insecure-ignore-tlog=true
// REPO@DIGEST: cosign's verification with a static public key, the
// simple-signing payload's claims checked against the digest.
func verifyImage(ctx context.Context, ref name.Reference, pub []byte) ([]oci.Signature, error) {
	verifier, err := sigs.LoadPublicKeyRaw(pub, crypto.SHA256)
	if err != nil {
		return nil, err
	}
	checked, _, err := cosign.VerifyImageSignatures(ctx, ref, &cosign.CheckOpts{
		SigVerifier:   verifier,
		ClaimVerifier: cosign.SimpleClaimVerifier,
		IgnoreTlog:    true,
	})
	return checked, err
}

// verifyBlob is cosign verify-blob --key KEY --signature FILE.sig
// --insecure-ignore-tlog=true FILE, with cosign's verification code, and the
// same with sigstore's verifier alone.
func verifyBlob(ctx context.Context, file, sigFile string, pub []byte) error {
	blob, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	b64, err := os.ReadFile(sigFile)
	if err != nil {
		return err
	}
	verifier, err := sigs.LoadPublicKeyRaw(pub, crypto.SHA256)
	if err != nil {
		return err
	}
	sig, err := static.NewSignature(blob, string(b64))
	if err != nil {
		return err
	}
	if _, err := cosign.VerifyBlobSignature(ctx, sig, &cosign.CheckOpts{SigVerifier: verifier, IgnoreTlog: true}); err != nil {
		return err
	}
	key, err := cryptoutils.UnmarshalPEMToPublicKey(pub)
	if err != nil {
		return err
	}
	plain, err := signature.LoadVerifier(key, crypto.SHA256)
	if err != nil {
		return err
	}
	raw, err := base64.StdEncoding.DecodeString(string(b64))
	if err != nil {
		return err
	}
	return plain.VerifySignature(bytes.NewReader(raw), bytes.NewReader(blob))
}

func newRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestTheSignedImageVerifiesWithItsKeyOnly(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	r := newRelease(t, host)
	keyFile, pub := keyPair(t, t.TempDir(), "s3cret")
	if err := r.sign(t, keyFile, "s3cret", "--image", r.ref.String()); err != nil {
		t.Fatal(err)
	}
	// Nothing is pushed yet: verification fails, as it does on an unsigned image.
	if _, err := verifyImage(ctx, r.ref, pub); err == nil {
		t.Fatal("an image with no signature pushed verified")
	}
	r.pushSignature(t)

	checked, err := verifyImage(ctx, r.ref, pub)
	if err != nil {
		t.Fatalf("cosign's verification of %s with the release's key: %v", r.ref, err)
	}
	if len(checked) != 1 {
		t.Fatalf("%d signatures verified, want 1", len(checked))
	}
	written, err := os.ReadFile(filepath.Join(r.dist, PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifyImage(ctx, r.ref, written); err != nil {
		t.Fatalf("with the release's %s: %v", PublicKeyFile, err)
	}

	_, otherPub := keyPair(t, t.TempDir(), "other")
	if _, err := verifyImage(ctx, r.ref, otherPub); err == nil {
		t.Error("the signature verified with another key")
	}
}

func TestATamperedOrMovedSignatureDoesNotVerify(t *testing.T) {
	ctx := context.Background()
	host := newRegistry(t)
	r := newRelease(t, host)
	keyFile, pub := keyPair(t, t.TempDir(), "s3cret")
	if err := r.sign(t, keyFile, "s3cret", "--image", r.ref.String()); err != nil {
		t.Fatal(err)
	}
	sv, err := LoadSigner(keyFile, []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	good, err := ImageSignature(ctx, sv, r.ref)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := good.Payload()
	if err != nil {
		t.Fatal(err)
	}
	b64, err := good.Base64Signature()
	if err != nil {
		t.Fatal(err)
	}
	push := func(t *testing.T, ref name.Digest, sig oci.Signature) {
		t.Helper()
		img, err := ocimutate.AppendSignatures(ociempty.Signatures(), false, sig)
		if err != nil {
			t.Fatal(err)
		}
		tag := r.repo.Tag("sha256-" + strings.TrimPrefix(ref.DigestStr(), "sha256:") + ".sig")
		if err := remote.Write(tag, img); err != nil {
			t.Fatal(err)
		}
	}

	// The untampered signature, pushed by the test itself, verifies: the
	// failures below are the tampering's.
	push(t, r.ref, good)
	if _, err := verifyImage(ctx, r.ref, pub); err != nil {
		t.Fatalf("the untampered signature: %v", err)
	}

	t.Run("payload", func(t *testing.T) {
		// One more space in the payload's JSON: the same claims, other bytes.
		tampered, err := static.NewSignature(bytes.Replace(pl, []byte(`{`), []byte(`{ `), 1), b64)
		if err != nil {
			t.Fatal(err)
		}
		push(t, r.ref, tampered)
		if _, err := verifyImage(ctx, r.ref, pub); err == nil {
			t.Error("a tampered payload verified")
		}
	})
	t.Run("another image's signature", func(t *testing.T) {
		// A good signature of another image, under this image's tag: the
		// signature is valid, the payload names the other digest.
		other := newRelease(t, host)
		sig, err := ImageSignature(ctx, sv, other.ref)
		if err != nil {
			t.Fatal(err)
		}
		push(t, r.ref, sig)
		if _, err := verifyImage(ctx, r.ref, pub); err == nil {
			t.Error("another image's signature verified for this one")
		}
	})
}

func TestTheSignedBlobsVerifyWithTheirKeyOnly(t *testing.T) {
	ctx := context.Background()
	r := newRelease(t, newRegistry(t))
	keyFile, pub := keyPair(t, t.TempDir(), "s3cret")
	if err := r.sign(t, keyFile, "s3cret", "--blob", chart, "--blob", "SHA256SUMS"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(r.dist, SignatureLayout)); !os.IsNotExist(err) {
		t.Errorf("no --image, yet %s/: %v", SignatureLayout, err)
	}
	_, otherPub := keyPair(t, t.TempDir(), "other")
	for _, b := range []string{chart, "SHA256SUMS"} {
		file := filepath.Join(r.dist, b)
		if err := verifyBlob(ctx, file, file+".sig", pub); err != nil {
			t.Errorf("%s: %v", b, err)
		}
		if err := verifyBlob(ctx, file, file+".sig", otherPub); err == nil {
			t.Errorf("%s verified with another key", b)
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, append(data, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := verifyBlob(ctx, file, file+".sig", pub); err == nil {
			t.Errorf("%s verified after a byte was added", b)
		}
	}
}

func TestNoKeyOrAWrongPasswordSignsNothing(t *testing.T) {
	r := newRelease(t, newRegistry(t))
	if err := r.sign(t, "", "", "--blob", chart); err == nil || !strings.Contains(err.Error(), "COSIGN_KEY") {
		t.Errorf("without COSIGN_KEY: %v, want an error naming it", err)
	}
	keyFile, _ := keyPair(t, t.TempDir(), "s3cret")
	if err := r.sign(t, keyFile, "wrong", "--blob", chart); err == nil {
		t.Error("a wrong password signed")
	}
	for _, f := range []string{chart + ".sig", PublicKeyFile} {
		if _, err := os.Stat(filepath.Join(r.dist, f)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want none", f, err)
		}
	}
}
