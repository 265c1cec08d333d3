/* The pod sandbox's "pause" process: holds the pod's namespaces, reaps orphans, exits on
 * SIGINT/SIGTERM. Built static (gcc -static) by images/build.sh; the kubelet's containerd uses
 * it as sandbox_image (registry.k8s.io/pause cannot be pulled here). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_term(int sig) { (void)sig; _exit(0); }
static void on_child(int sig) { (void)sig; while (waitpid(-1, NULL, WNOHANG) > 0) {} }

int main(void) {
  struct sigaction term = {.sa_handler = on_term}, child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (getpid() != 1) fprintf(stderr, "pause: warning: not PID 1\n");
  if (sigaction(SIGINT, &term, NULL) < 0 || sigaction(SIGTERM, &term, NULL) < 0 ||
      sigaction(SIGCHLD, &child, NULL) < 0) return 1;
  for (;;) pause();
}
