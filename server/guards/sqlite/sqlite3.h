/* Guard: CMakeLists.txt (pdbsym_uses) puts this folder ahead of the system's
 * include folders for every target that does not own the library, so that
 * including sqlite3.h anywhere else stops the build here. */
#error "sqlite3.h is included only in server/cache/ (docs/architecture.md)"
