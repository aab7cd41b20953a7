/* The C ping-pong used by verbs_test (test-only): ibv_rc_pingpong ported by
 * renaming, both sides in one thread, on the simulator or on a real device. */
#ifndef SOFTFAB_TESTS_SUPPORT_PINGPONG_H_
#define SOFTFAB_TESTS_SUPPORT_PINGPONG_H_

#include <stdint.h>

#include "api/softfab/verbs.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pp_options {
  int iters;      /* round trips */
  int size;       /* bytes per message */
  int use_event;  /* sleep on completion channels (ibv_rc_pingpong -e) */
  int timeout_ms; /* give up after this long (wall clock); 0: never */
};

struct pp_result {
  int round_trips;
  int bytes_ok;
  unsigned int cq_events; /* channel events taken (use_event) */
  uint64_t virtual_ns;    /* the simulator's clock at the end; 0 on a device */
};

/* Runs `iters` RC round trips of `size` bytes between devices 0 and 1 of a
 * simulated fabric, busy-polling; 0 on success. */
int sfv_pingpong_run(struct sfv_sim_fabric* fabric, int iters, int size,
                     struct pp_result* result);
/* The same with every option. */
int sfv_pingpong_run_sim(struct sfv_sim_fabric* fabric,
                         const struct pp_options* opt,
                         struct pp_result* result);
/* Between two contexts of the real device named ib_devname (NULL: the first
 * listed); 0 on success, 1 with the reason on stderr. */
int sfv_pingpong_run_device(const char* ib_devname,
                            const struct pp_options* opt,
                            struct pp_result* result);

#ifdef __cplusplus
}
#endif

#endif /* SOFTFAB_TESTS_SUPPORT_PINGPONG_H_ */
