package repair

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
)

// maxKeyFile bounds a key file: a PEM Ed25519 key is about 120 bytes, a
// rotation's two or three keys a few hundred.
const maxKeyFile = 64 << 10

// LoadPrivateKey reads the gateway's signing key: one PEM block "PRIVATE
// KEY" holding an Ed25519 key in PKCS#8 (openssl genpkey -algorithm
// ed25519). Errors name the file.
func LoadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	k, err := ParsePrivateKeyPEM(data)
	if err != nil {
		return nil, fmt.Errorf("repair: private key %s: %w", path, err)
	}
	return k, nil
}

// LoadPublicKeys reads the keys an agent verifies with: one or more PEM
// blocks "PUBLIC KEY", each an Ed25519 key in PKIX (openssl pkey -pubout).
// More than one: a rotation, where the old and the new key are both
// accepted until the gateway signs with the new one only. Errors name the
// file.
func LoadPublicKeys(path string) ([]ed25519.PublicKey, error) {
	data, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := ParsePublicKeysPEM(data)
	if err != nil {
		return nil, fmt.Errorf("repair: public key file %s: %w", path, err)
	}
	return keys, nil
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("repair: reading key file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("repair: reading key file %s: %w", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("repair: key file %s is over %d bytes: not a key", path, maxKeyFile)
	}
	return data, nil
}

// ParsePrivateKeyPEM parses one PEM "PRIVATE KEY" block (PKCS#8, Ed25519).
// Anything else in data is refused: a file with two keys is a mistake.
func ParsePrivateKeyPEM(data []byte) (ed25519.PrivateKey, error) {
	block, rest := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block")
	}
	if block.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("PEM block %q, want \"PRIVATE KEY\" (PKCS#8)", block.Type)
	}
	if b, _ := pem.Decode(rest); b != nil {
		return nil, errors.New("more than one PEM block: want exactly one private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parsing PKCS#8: %w", err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, want an Ed25519 key", k)
	}
	return ek, nil
}

// ParsePublicKeysPEM parses every PEM block of data; each must be a
// "PUBLIC KEY" (PKIX) of Ed25519, and there must be at least one.
func ParsePublicKeysPEM(data []byte) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for i := 0; ; i++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("PEM block %d is %q, want \"PUBLIC KEY\" (PKIX)", i, block.Type)
		}
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: parsing PKIX: %w", i, err)
		}
		ek, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("PEM block %d is a %T, want an Ed25519 key", i, k)
		}
		keys = append(keys, ek)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM block \"PUBLIC KEY\"")
	}
	return keys, nil
}
