/* The C ping-pong used by verbs_test (test-only). */
#ifndef SOFTFAB_API_PINGPONG_H_
#define SOFTFAB_API_PINGPONG_H_

#include <stdint.h>

#include "api/softfab/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pp_result {
  int round_trips;
  int bytes_ok;
  uint64_t virtual_ns;
};

/* Runs `iters` RC round trips of `size` bytes between devices 0 and 1; 0 on
 * success. */
int sfv_pingpong_run(struct sfv_sim_fabric* fabric, int iters, int size,
                     struct pp_result* result);

#ifdef __cplusplus
}
#endif

#endif /* SOFTFAB_API_PINGPONG_H_ */
