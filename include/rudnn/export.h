/* Symbol visibility: only the public API is exported from librudnn.so. */
#ifndef RUDNN_EXPORT_H
#define RUDNN_EXPORT_H

#if defined(RUDNN_BUILDING_LIBRARY) && defined(__GNUC__)
#define RUDNN_API __attribute__((visibility("default")))
#else
#define RUDNN_API
#endif

#endif
