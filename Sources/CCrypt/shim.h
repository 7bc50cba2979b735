/* The system's libxcrypt (libcrypt-dev), for the collector's HTTP server only: bcrypt, to check
   the passwords of --web-config-file against their hashes. The library bots import never links it. */
#include <crypt.h>
