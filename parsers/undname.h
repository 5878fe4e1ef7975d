/*
 * undname.h - undecoration of Microsoft C++ decorated names ("?foo@@YAXH@Z")
 * and of x86 C names ("_foo@4", "@foo@8"), as DbgHelp shows public symbols
 * with SYMOPT_UNDNAME.
 *
 * undname_full gives the whole declaration exactly as llvm-undname (LLVM 14)
 * prints it ("public: int __cdecl geo::Rect::area(void) const").
 * undname_short gives the qualified name only, the name part of that
 * declaration ("geo::Rect::area", "std::max<int>",
 * "std::vector<int, class std::allocator<int>>::push_back",
 * "geo::Widget::`vftable'"); string literals are named "`string'", RTTI type
 * descriptors keep their type ("class geo::Widget `RTTI Type Descriptor'"),
 * x86 stdcall/fastcall C names lose their decoration ("_foo@12" ->
 * "foo") and ARM64EC entry points their "#".  A plain "_foo" is left alone: only the caller knows whether the
 * module is x86, where the underscore is a decoration (undname_public).
 *
 * Both read exactly len bytes of mangled (no NUL needed), write a
 * NUL-terminated string into out (truncated to cap) and return true; they
 * return false (out = a copy of the input, truncated) for a name that is
 * not decorated or cannot be undecorated, and false without writing when
 * cap is 0.  MD5-hashed names ("??@...@") come back unchanged, with true.
 * out must not overlap mangled.  Pure and thread-safe; no heap allocation:
 * about 100 KiB of stack.
 */
#ifndef PDBSYM_UNDNAME_H
#define PDBSYM_UNDNAME_H

#include <stdbool.h>
#include <stddef.h>

bool undname_short(const char *mangled, size_t len, char *out, size_t cap);
bool undname_full(const char *mangled, size_t len, char *out, size_t cap);

/* The name of a public symbol as DbgHelp shows it with SYMOPT_UNDNAME, and
 * llvm-symbolizer (LLVM 19) for an i386 image: undname_short, and on x86
 * (x86 true) a plain C name loses its leading underscore too ("_foo" ->
 * "foo", "__chkstk" -> "_chkstk"), as the stdcall and fastcall ones do
 * ("_foo@12", "@foo@8" -> "foo").  Returns true when out differs from the
 * input. */
bool undname_public(const char *mangled, size_t len, bool x86, char *out, size_t cap);

#endif
