/* msg_dsl.h - short names used in schema rows (see protocol.h).  Included
 * where rows are expanded; messages.h undefines them again. */
#define V(a) a, ST_VMAX
#define VR(a, b) a, b
#define NN -1, -1
#define NUL(a) a, ST_VMAX
#define NULR(a, b) a, b
#define NT -1
