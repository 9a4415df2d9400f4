package config

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// DevJWTSecret is the JWT key of ISLE_DEV=1 without API_JWT_SECRET. It is in
// the source, so anyone can mint any token with it: the API logs a warning
// whenever it runs with it, and never picks it on its own.
const DevJWTSecret = "isle-local-development-secret-do-not-use-in-production"

// JWTSecretFileDefault is where scripts/up keeps the local fleet's random
// key (git-ignored), relative to the working directory: the repository's
// root, where scripts/up starts the binaries and the README runs islectl.
const JWTSecretFileDefault = "var/jwt-secret"

// JWTSecretMin is the shortest key accepted, in bytes.
const JWTSecretMin = 32

// JWT is the token section, shared by the API and islectl token. The key
// is API_JWT_SECRET, else the content of API_JWT_SECRET_FILE, else, with
// ISLE_DEV=1 only, DevJWTSecret.
type JWT struct {
	Secret    []byte // nil when no key is configured
	IsDefault bool   // ISLE_DEV=1 and no key: the public DevJWTSecret is in use
	Dev       bool   // ISLE_DEV=1: development mode (also lets the API and the worker trust test payment keys)
	Leeway    time.Duration
	missing   error // why Secret is nil
}

// Key returns the HS256 key, or, when none is configured, an error naming
// the variables that configure one.
func (j JWT) Key() ([]byte, error) {
	if j.missing != nil {
		return nil, j.missing
	}
	return j.Secret, nil
}

func loadJWT(l *loader) JWT {
	secret := l.Secret("API_JWT_SECRET", "", fmt.Sprintf(
		"HS256 key of bearer tokens, at least %d bytes. Unset, the key is read from API_JWT_SECRET_FILE; with neither, the API refuses to start unless ISLE_DEV=1.", JWTSecretMin))
	file, _ := l.lookup(Var{Name: "API_JWT_SECRET_FILE", Default: JWTSecretFileDefault,
		Doc: "File holding the HS256 key when API_JWT_SECRET is unset (surrounding blanks ignored); relative to the working directory. scripts/up writes a random key to the default file on its first run and reuses it; `islectl token` reads the same file."})
	dev := loadDev(l)
	j := JWT{Dev: dev, Leeway: l.Duration("API_JWT_LEEWAY", 30*time.Second, 0, 10*time.Minute, "Clock skew allowed on a token's exp, nbf and iat.")}
	from := "API_JWT_SECRET"
	if secret == "" {
		explicit := file != ""
		if !explicit {
			file = JWTSecretFileDefault
		}
		raw, err := l.readFile(file)
		switch {
		case err == nil:
			secret, from = strings.TrimSpace(string(raw)), "API_JWT_SECRET_FILE "+file
			if secret == "" {
				l.failf("API_JWT_SECRET_FILE", file, "the file is empty")
			}
		case explicit || !errors.Is(err, fs.ErrNotExist): // only the default file may be missing
			l.failf("API_JWT_SECRET_FILE", file, "%v", err)
		}
	}
	switch {
	case secret == "" && dev:
		return JWT{Secret: []byte(DevJWTSecret), IsDefault: true, Dev: true, Leeway: j.Leeway}
	case secret == "":
		j.missing = fmt.Errorf("API_JWT_SECRET is not set and API_JWT_SECRET_FILE (%s) holds no key: set API_JWT_SECRET to a random key of at least %d bytes "+
			"(scripts/up keeps one in %s), or ISLE_DEV=1 to use the public development key, with which anyone can mint tokens",
			file, JWTSecretMin, JWTSecretFileDefault)
		return j
	case len(secret) < JWTSecretMin:
		l.errs = append(l.errs, fmt.Errorf("%s: %d bytes; want at least %d", from, len(secret), JWTSecretMin))
	}
	j.Secret = []byte(secret)
	return j
}

// loadDev reads ISLE_DEV, development mode.
func loadDev(l *loader) bool {
	return l.Bool("ISLE_DEV", false,
		"Development mode: with no key configured, sign and check tokens with the public development key (anyone can mint tokens) instead of refusing to start; "+
			"and let the API and the worker start with local test payment gateway keys (PAYMENT_TEST_KEYS), with which anyone can fake a payment. For local experiments only; scripts/up sets it when it loads the test keys it made.")
}
