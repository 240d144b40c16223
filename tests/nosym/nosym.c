/* A shared object named like the CUDA plugin that does not export
 * rudnn_backend_entry_v1: the loader must report the backend unavailable
 * (and say why) instead of crashing. */
#if defined(__GNUC__)
#define NOSYM_EXPORT __attribute__((visibility("default")))
#else
#define NOSYM_EXPORT
#endif

NOSYM_EXPORT int rudnn_not_a_backend(void);

NOSYM_EXPORT int rudnn_not_a_backend(void) { return 42; }
