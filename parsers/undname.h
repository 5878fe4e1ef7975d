/*
 * undname.h - undecoration of Microsoft C++ decorated names ("?foo@@YAXH@Z")
 * and of x86 C names ("_foo", "_foo@4", "@foo@8"), as DbgHelp shows public
 * symbols with SYMOPT_UNDNAME.
 *
 * undname_short gives the qualified name only ("geo::Rect::area",
 * "std::vector<int,std::allocator<int> >::push_back"); undname_full the whole
 * declaration as llvm-undname / UnDecorateSymbolName print it
 * ("public: int __cdecl geo::Rect::area(void) const").
 * Both write a NUL-terminated string into out (truncated to cap) and return
 * true; they return false (out = a copy of the input) for a name that is not
 * decorated or cannot be undecorated.  Pure; no allocation beyond the stack.
 */
#ifndef PDBSYM_UNDNAME_H
#define PDBSYM_UNDNAME_H

#include <stdbool.h>
#include <stddef.h>

bool undname_short(const char *mangled, size_t len, char *out, size_t cap);
bool undname_full(const char *mangled, size_t len, char *out, size_t cap);

#endif
