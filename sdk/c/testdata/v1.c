/* A v1 handler (no GS_ABI_V2) built with the current header by sdk/c/v2_test.go: it must not
 * import groupstate.state. */
#define GROUPSTATE_IMPLEMENTATION
#include "groupstate.h"

static int handle(gs_group *g) { return gs_state_update(g, "1", 1); }
GS_HANDLER(handle);
