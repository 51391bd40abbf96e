// ARBITER_HOT_INLINE: for the few functions a cache-hit call or plan run goes through. GCC
// keeps them out of line at -O2 (each is too big alone, and each has a cold branch), which
// costs a prologue, an epilogue and spilled registers per layer: a third of a plan run.
#pragma once

#if defined(__GNUC__)
#define ARBITER_HOT_INLINE [[gnu::always_inline]] inline
#else
#define ARBITER_HOT_INLINE inline
#endif
