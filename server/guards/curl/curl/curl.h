/* Guard: CMakeLists.txt (pdbsym_uses) puts this folder ahead of the system's
 * include folders for every target that does not own the library, so that
 * including curl/curl.h anywhere else stops the build here. */
#error "curl/curl.h is included only in server/fetch/ (docs/architecture.md)"
