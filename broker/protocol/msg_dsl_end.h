/* msg_dsl_end.h - undefines the row helpers of msg_dsl.h at the end of a
 * header of schema rows, unless the including .c file expands rows itself
 * (ST_MESSAGES_KEEP_DSL). */
#ifndef ST_MESSAGES_KEEP_DSL
#undef V
#undef VR
#undef NN
#undef NUL
#undef NULR
#undef NT
#endif
