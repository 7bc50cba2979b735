/* The system's zlib (zlib1g-dev, a prerequisite of Swift on Linux), for the collector's gzip
   responses only: the library bots import never links it. */
#include <zlib.h>
