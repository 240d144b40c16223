#include "rudnn/version.h"

const char *rudnn_version(void) { return RUDNN_VERSION_STRING; }
