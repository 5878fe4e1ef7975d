/* Guard: CMakeLists.txt (pdbsym_uses) puts this folder ahead of the system's
 * include folders for every target that does not own the library, so that
 * including microhttpd.h anywhere else stops the build here. */
#error "microhttpd.h is included only in server/service/ (docs/architecture.md)"
