/* The real-node tier's pod sandbox (localhost/pause:local, built by scripts/realnode-images), after
   Kubernetes' build/pause/linux/pause.c: PID 1 of every pod, which holds its namespaces, reaps orphans,
   and exits on SIGINT or SIGTERM. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void sigdown(int signo) {
  (void)signo;
  _exit(0);
}

static void sigreap(int signo) {
  (void)signo;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction down = {.sa_handler = sigdown};
  struct sigaction reap = {.sa_handler = sigreap, .sa_flags = SA_NOCLDSTOP};
  sigaction(SIGINT, &down, NULL);
  sigaction(SIGTERM, &down, NULL);
  sigaction(SIGCHLD, &reap, NULL);
  for (;;) pause();
}
