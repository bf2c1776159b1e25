package service

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultServerURL is the URL used when neither a URL nor $NATS_URL is given: the
// embedded server of `groupstate serve` with its defaults (see [EmbeddedOptions]).
const DefaultServerURL = "nats://127.0.0.1:4222"

// ConnOptions says how to reach NATS for [Connect]: the URL, credentials (a
// creds file, an nkey seed file, user and password, or a token) and TLS (CA,
// client certificate and key). Only URL is commonly set; the credential fields
// are for an external NATS deployment.
type ConnOptions struct {
	// URL is the server URL (a comma-separated list is allowed). Default [DefaultURL].
	URL string
	// Name is the connection name shown by the server's monitoring. Default "groupstate".
	Name string
	// CredsFile is a JWT user credentials file (.creds). Optional.
	CredsFile string
	// NKeyFile is an nkey seed file. Optional.
	NKeyFile string
	// User and Password authenticate with a user name and password. Optional.
	User, Password string
	// Token authenticates with a token. Optional.
	Token string
	// TLSCA is a PEM file of root CAs to verify the server with. Optional.
	TLSCA string
	// TLSCert and TLSKey are a PEM client certificate and key. Optional; set both or neither.
	TLSCert, TLSKey string
	// Logger receives connection events (disconnect, reconnect, close, async
	// errors). Default slog.Default().
	Logger *slog.Logger
}

// DefaultURL returns $NATS_URL when set, else [DefaultServerURL].
func DefaultURL() string {
	if u := strings.TrimSpace(os.Getenv("NATS_URL")); u != "" {
		return u
	}
	return DefaultServerURL
}

// Connect dials NATS; the service, the client and the CLI use connections made
// by it. The first connection attempt is not retried (a CLI command fails
// fast); once connected the client reconnects forever, every 250ms, buffering
// publishes meanwhile. Disconnects, reconnects, closes and
// asynchronous errors are logged. A refused connection yields an error that
// names the URL and asks whether `groupstate serve` is running.
func Connect(opts ConnOptions) (*nats.Conn, error) {
	if opts.URL == "" {
		opts.URL = DefaultURL()
	}
	if opts.Name == "" {
		opts.Name = "groupstate"
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.Default()
	}
	lg = lg.With("component", "nats")
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return nil, errors.New("service: TLS client certificate and key must be given together")
	}
	no := []nats.Option{
		nats.Name(opts.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				lg.Warn("disconnected from NATS", "url", redactURL(opts.URL), "err", err)
			} else {
				lg.Info("disconnected from NATS", "url", redactURL(opts.URL))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			lg.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				lg.Info("NATS connection closed", "err", err)
			} else {
				lg.Debug("NATS connection closed")
			}
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				lg.Warn("NATS async error", "subject", sub.Subject, "err", err)
			} else {
				lg.Warn("NATS async error", "err", err)
			}
		}),
	}
	if opts.CredsFile != "" {
		no = append(no, nats.UserCredentials(opts.CredsFile))
	}
	if opts.NKeyFile != "" {
		o, err := nats.NkeyOptionFromSeed(opts.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("service: reading nkey seed %s: %w", opts.NKeyFile, err)
		}
		no = append(no, o)
	}
	if opts.User != "" || opts.Password != "" {
		no = append(no, nats.UserInfo(opts.User, opts.Password))
	}
	if opts.Token != "" {
		no = append(no, nats.Token(opts.Token))
	}
	if opts.TLSCA != "" {
		no = append(no, nats.RootCAs(opts.TLSCA))
	}
	if opts.TLSCert != "" {
		no = append(no, nats.ClientCert(opts.TLSCert, opts.TLSKey))
	}
	nc, err := nats.Connect(opts.URL, no...)
	if err != nil {
		if errors.Is(err, nats.ErrNoServers) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("service: cannot connect to NATS at %s (is groupstate serve running?): %w", redactURL(opts.URL), err)
		}
		if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) {
			return nil, fmt.Errorf("service: NATS at %s refused the connection's credentials (give --user and --password, --creds or --nkey of one of its users): %w", redactURL(opts.URL), err)
		}
		return nil, fmt.Errorf("service: cannot connect to NATS at %s: %w", redactURL(opts.URL), err)
	}
	return nc, nil
}

// redactURL hides a password embedded in u ("nats://user:pass@host").
func redactURL(u string) string {
	parts := strings.Split(u, ",")
	for i, p := range parts {
		scheme := ""
		rest := p
		if j := strings.Index(p, "://"); j >= 0 {
			scheme, rest = p[:j+3], p[j+3:]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			cred := rest[:at]
			if c := strings.Index(cred, ":"); c >= 0 {
				cred = cred[:c] + ":xxxxx"
			} else {
				cred = "xxxxx"
			}
			rest = cred + rest[at:]
		}
		parts[i] = scheme + rest
	}
	return strings.Join(parts, ",")
}
