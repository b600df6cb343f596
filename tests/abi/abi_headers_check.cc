// The C header check compiled as C++20: the same checks, through a C++ compiler's eyes (extern "C"
// blocks, no implicit void* conversions, stricter enum rules). See abi_headers_check.c.
#include "abi_headers_check.c"
