/* version.c: the library's own version, compiled in (version.h). */
#include <duograd/version.h>

unsigned dg_version(void) { return DG_VERSION_NUMBER; }

const char *dg_version_string(void) { return DG_VERSION_STRING; }
