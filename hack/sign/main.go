// Command sign signs a winready release with a cosign key, offline, with
// cosign's own libraries: the image index by digest (a cosign signature, as
// `cosign sign --key` makes it, written as an OCI layout that `make publish`
// pushes to the image's `sha256-<digest>.sig` tag) and files as blobs (a
// base64 signature beside each, as `cosign sign-blob --key` writes it).
//
//	COSIGN_KEY=cosign.key COSIGN_PASSWORD=... go run . --dist ../../dist \
//	    --image ghcr.io/winready/winready@sha256:... --blob winready-0.1.0.tgz
//	go run . --dist ../../dist --blob SHA256SUMS
//
// The key is a cosign private key file (`cosign generate-key-pair`: an
// encrypted PEM), its password COSIGN_PASSWORD, as cosign's CLI reads them.
// Every run writes the public key as DIST/winready.pub. No Fulcio certificate
// and no Rekor entry are made: verify with --insecure-ignore-tlog=true.
//
// It is a module of its own so that winready's go.mod does not carry cosign.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/cosign/v2/pkg/oci"
	ociempty "github.com/sigstore/cosign/v2/pkg/oci/empty"
	ocimutate "github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

const (
	// PublicKeyFile is the public key's name in the release.
	PublicKeyFile = "winready.pub"
	// SignatureLayout is the directory, in the release, of the image's
	// signature as an OCI layout: one image, the one cosign pushes to
	// sha256-<digest>.sig.
	SignatureLayout = "signature"
	// refNameAnnotation names the tag in the layout's index.
	refNameAnnotation = "org.opencontainers.image.ref.name"
)

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(context.Background(), os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sign:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sign", flag.ContinueOnError)
	dist := fs.String("dist", "dist", "the release's directory: the files to sign, and where the signatures go")
	image := fs.String("image", "", "the image index to sign, by digest: REGISTRY/winready@sha256:<digest>")
	var blobs stringList
	fs.Var(&blobs, "blob", "a file of --dist to sign as a blob into <file>.sig (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	keyFile := os.Getenv("COSIGN_KEY")
	if keyFile == "" {
		return errors.New("COSIGN_KEY is not set: the path of a cosign private key (cosign generate-key-pair)")
	}
	sv, err := LoadSigner(keyFile, []byte(os.Getenv("COSIGN_PASSWORD")))
	if err != nil {
		return err
	}
	if err := WritePublicKey(sv, filepath.Join(*dist, PublicKeyFile)); err != nil {
		return err
	}
	if *image != "" {
		ref, err := name.NewDigest(*image)
		if err != nil {
			return fmt.Errorf("--image %q: %w (want REPOSITORY@sha256:<digest>)", *image, err)
		}
		tag, err := SignImage(ctx, sv, ref, filepath.Join(*dist, SignatureLayout))
		if err != nil {
			return err
		}
		fmt.Printf("signed %s: %s/ (push it to %s)\n", ref, filepath.Join(*dist, SignatureLayout), tag)
	}
	for _, b := range blobs {
		file := filepath.Join(*dist, b)
		if err := SignBlob(ctx, sv, file, file+".sig"); err != nil {
			return err
		}
		fmt.Printf("signed %s: %s.sig\n", file, file)
	}
	return nil
}

// LoadSigner reads a cosign private key file (an encrypted PEM, as cosign
// generate-key-pair writes it) with its password, as cosign sign --key does.
func LoadSigner(keyFile string, password []byte) (signature.SignerVerifier, error) {
	pem, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading the signing key: %w", err)
	}
	sv, err := cosign.LoadPrivateKey(pem, password, nil)
	if err != nil {
		return nil, fmt.Errorf("loading the signing key %s (is COSIGN_PASSWORD its password?): %w", keyFile, err)
	}
	return sv, nil
}

// WritePublicKey writes the signer's public key as PEM, the format of
// cosign.pub.
func WritePublicKey(sv signature.SignerVerifier, file string) error {
	pub, err := sv.PublicKey()
	if err != nil {
		return err
	}
	data, err := cryptoutils.MarshalPublicKeyToPEM(pub)
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o644)
}

// SignImage signs the image (an index or a manifest) by its digest as cosign
// sign does: the simple-signing payload naming the digest, signed with the
// key, as the one layer of a signature image. It writes that image into dir
// as an OCI layout, its index naming the tag cosign looks it up by
// (sha256-<digest>.sig in the image's repository), and returns the tag.
func SignImage(ctx context.Context, sv signature.SignerVerifier, ref name.Digest, dir string) (name.Tag, error) {
	sig, err := ImageSignature(ctx, sv, ref)
	if err != nil {
		return name.Tag{}, err
	}
	sigs, err := ocimutate.AppendSignatures(ociempty.Signatures(), false, sig)
	if err != nil {
		return name.Tag{}, err
	}
	tag, err := ociremote.SignatureTag(ref)
	if err != nil {
		return name.Tag{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return name.Tag{}, err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return name.Tag{}, fmt.Errorf("writing the signature's layout: %w", err)
	}
	if err := p.AppendImage(sigs, layout.WithAnnotations(map[string]string{refNameAnnotation: tag.TagStr()})); err != nil {
		return name.Tag{}, fmt.Errorf("writing the signature's layout: %w", err)
	}
	return tag, nil
}

// ImageSignature is cosign's signature of the image: its simple-signing
// payload and the payload's signature.
func ImageSignature(ctx context.Context, sv signature.SignerVerifier, ref name.Digest) (oci.Signature, error) {
	pl, err := (&payload.Cosign{Image: ref}).MarshalJSON()
	if err != nil {
		return nil, err
	}
	raw, err := sv.SignMessage(bytes.NewReader(pl), options.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("signing %s: %w", ref, err)
	}
	return static.NewSignature(pl, base64.StdEncoding.EncodeToString(raw))
}

// SignBlob signs the file's bytes as cosign sign-blob --key does and writes
// the base64 signature to sigFile, which cosign verify-blob --signature reads.
func SignBlob(ctx context.Context, sv signature.SignerVerifier, file, sigFile string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	raw, err := sv.SignMessage(bytes.NewReader(data), options.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("signing %s: %w", file, err)
	}
	return os.WriteFile(sigFile, []byte(base64.StdEncoding.EncodeToString(raw)), 0o644)
}
