/* The system's OpenSSL (libssl-dev), for the collector only: TLS for its HTTP server
   (--web-config-file) and its OTLP exporter's https:// pushes, SHA-256 and random bytes for the
   server's password cache. The library bots import
   never links it. The functions below stand for OpenSSL's function-like macros, which Swift
   cannot call; each makes exactly the call its name says. */
#ifndef RINGSIDE_COPENSSL_SHIM_H
#define RINGSIDE_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

/* Lets SSL_write return after a record, and take its retry from a buffer that moved (a Swift
   array's storage may), and frees a connection's buffers while it is idle. */
static inline long rs_ssl_ctx_set_nonblocking_modes(SSL_CTX *ctx) {
    return SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER
                                     | SSL_MODE_RELEASE_BUFFERS);
}

/* The lowest and highest protocol versions (TLS1_2_VERSION, TLS1_3_VERSION); 1 on success. */
static inline int rs_ssl_ctx_set_protocol_versions(SSL_CTX *ctx, int min_version, int max_version) {
    return SSL_CTX_set_min_proto_version(ctx, min_version) == 1
        && SSL_CTX_set_max_proto_version(ctx, max_version) == 1;
}

/* No renegotiation, no compression, no session tickets (a resumed session would skip the
   client certificate's check against a CA file changed since); the server's cipher order when
   prefer_server is set. */
static inline void rs_ssl_ctx_set_server_options(SSL_CTX *ctx, int prefer_server) {
    uint64_t options = SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET;
    if (prefer_server) options |= SSL_OP_CIPHER_SERVER_PREFERENCE;
    SSL_CTX_set_options(ctx, options);
}

/* No server-side session cache either, for the same reason as the tickets. */
static inline long rs_ssl_ctx_disable_session_cache(SSL_CTX *ctx) {
    return SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
}

/* The key-exchange groups, e.g. "X25519:P-256"; 1 on success. */
static inline int rs_ssl_ctx_set_groups(SSL_CTX *ctx, const char *groups) {
    return (int)SSL_CTX_set1_groups_list(ctx, groups);
}

/* The reason code of an error from the error queue (ERR_GET_REASON). */
static inline int rs_err_reason(unsigned long error) {
    return ERR_GET_REASON(error);
}

/* A passphrase callback that gives none: an encrypted key is refused, never asked for on a
   terminal (OpenSSL's default callback would read one from it). */
static inline int rs_no_passphrase(char *buffer, int size, int writing, void *context) {
    (void)buffer;
    (void)size;
    (void)writing;
    (void)context;
    return 0;
}

/* The next PEM certificate in `bio` (with its trust settings when `auxiliary`, as the first of
   a chain file is read), skipping PEM blocks of other kinds; NULL at the end or on an error. */
static inline X509 *rs_pem_read_certificate(BIO *bio, int auxiliary) {
    return auxiliary ? PEM_read_bio_X509_AUX(bio, NULL, rs_no_passphrase, NULL)
                     : PEM_read_bio_X509(bio, NULL, rs_no_passphrase, NULL);
}

/* The first PEM private key in `bio`; NULL when there is none or it is encrypted. */
static inline EVP_PKEY *rs_pem_read_private_key(BIO *bio) {
    return PEM_read_bio_PrivateKey(bio, NULL, rs_no_passphrase, NULL);
}

/* Appends a certificate to the chain sent after the server's own; the context takes it. */
static inline long rs_ssl_ctx_add0_chain_cert(SSL_CTX *ctx, X509 *certificate) {
    return SSL_CTX_add0_chain_cert(ctx, certificate);
}

/* Whether `error` says a PEM read found no further block: the end of the bytes, not a fault. */
static inline int rs_err_is_pem_end(unsigned long error) {
    return ERR_GET_LIB(error) == ERR_LIB_PEM && ERR_GET_REASON(error) == PEM_R_NO_START_LINE;
}

/* The name sent in the client's hello (SNI). The corresponding macro is SSL_set_tlsext_host_name. */
static inline long rs_ssl_set_server_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

/* Client contexts: no renegotiation, no compression. */
static inline void rs_ssl_ctx_set_client_options(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
}

#endif
