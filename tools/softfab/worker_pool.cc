// softfab command line: the forked worker processes of a study and the
// parent's poll(2) loop that feeds them seeds and collects their answers.
#include "tools/softfab/worker_pool.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <optional>

namespace softfab::cli {
namespace {

struct Worker {
  pid_t pid = -1;
  int task_fd = -1;    // Parent writes seed numbers here.
  int answer_fd = -1;  // Parent reads answer lines here.
  std::string buffer;  // Answer bytes not yet ending in a newline.
  std::optional<SeedTask> busy;
};

bool WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The child's loop: a seed number per line in, an answer per line out, until
// the parent closes the task pipe.
[[noreturn]] void WorkerMain(int task_fd, int answer_fd, const SeedWork& work) {
  std::string pending;
  char chunk[256];
  for (;;) {
    size_t newline;
    while ((newline = pending.find('\n')) == std::string::npos) {
      ssize_t n = read(task_fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(0);
      pending.append(chunk, static_cast<size_t>(n));
    }
    const uint64_t seed = std::strtoull(pending.c_str(), nullptr, 10);
    pending.erase(0, newline + 1);
    std::string line = work(seed);
    for (char& c : line) {
      if (c == '\n') c = ' ';  // One answer is one line, whatever work said.
    }
    line.push_back('\n');
    if (!WriteAll(answer_fd, line)) _exit(3);
  }
}

std::string DescribeExit(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "worker killed by signal " + std::to_string(sig) + " (" +
           strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) {
    return "worker exited with status " + std::to_string(WEXITSTATUS(status));
  }
  return "worker ended abnormally";
}

class Pool {
 public:
  Pool(const SeedWork& work, const SeedAnswer& answer, const SeedCrash& crash)
      : work_(work), answer_(answer), crash_(crash) {}

  bool Run(const std::vector<SeedTask>& tasks, int jobs, std::string* error) {
    for (const SeedTask& t : tasks)
      (t.pass == 0 ? first_ : second_).push_back(t);
    remaining_ = tasks.size();
    workers_.resize(static_cast<size_t>(jobs));
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (!Start(i, error)) {
        StopAll();
        return false;
      }
      Feed(i);
    }
    while (remaining_ > 0) {
      std::vector<pollfd> fds;
      std::vector<size_t> slots;
      for (size_t i = 0; i < workers_.size(); ++i) {
        if (workers_[i].answer_fd < 0 || !workers_[i].busy) continue;
        fds.push_back({workers_[i].answer_fd, POLLIN, 0});
        slots.push_back(i);
      }
      if (fds.empty()) break;  // Nothing in flight: cannot happen.
      if (poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        *error = std::string("poll: ") + std::strerror(errno);
        StopAll();
        return false;
      }
      for (size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0) continue;
        if (!Drain(slots[k], error)) {
          StopAll();
          return false;
        }
      }
    }
    StopAll();
    return true;
  }

 private:
  bool Start(size_t slot, std::string* error) {
    int task_pipe[2], answer_pipe[2];
    if (pipe(task_pipe) != 0) {
      *error = std::string("pipe: ") + std::strerror(errno);
      return false;
    }
    if (pipe(answer_pipe) != 0) {
      *error = std::string("pipe: ") + std::strerror(errno);
      close(task_pipe[0]);
      close(task_pipe[1]);
      return false;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t pid = fork();
    if (pid < 0) {
      *error = std::string("fork: ") + std::strerror(errno);
      for (int fd :
           {task_pipe[0], task_pipe[1], answer_pipe[0], answer_pipe[1]})
        close(fd);
      return false;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      // Other workers' pipe ends must close here, or they never see EOF.
      for (const Worker& w : workers_) {
        if (w.task_fd >= 0) close(w.task_fd);
        if (w.answer_fd >= 0) close(w.answer_fd);
      }
      close(task_pipe[1]);
      close(answer_pipe[0]);
      WorkerMain(task_pipe[0], answer_pipe[1], work_);
    }
    close(task_pipe[0]);
    close(answer_pipe[1]);
    Worker& w = workers_[slot];
    w = Worker{};
    w.pid = pid;
    w.task_fd = task_pipe[1];
    w.answer_fd = answer_pipe[0];
    return true;
  }

  // The next task for `slot`: pass 0 in order; then pass 1, preferring a seed
  // whose first run was in another slot.
  std::optional<SeedTask> Next(size_t slot) {
    if (!first_.empty()) {
      SeedTask t = first_.front();
      first_.pop_front();
      return t;
    }
    if (second_.empty()) return std::nullopt;
    auto pick = second_.end();
    for (auto it = second_.begin(); it != second_.end(); ++it) {
      auto ran = first_slot_.find(it->seed);
      if (ran == first_slot_.end() || ran->second != slot) {
        pick = it;
        break;
      }
    }
    if (pick == second_.end()) {
      // Every seed left first ran here. Another live worker can take them
      // all, so this one retires; alone, it runs them itself.
      for (size_t other = 0; other < workers_.size(); ++other) {
        if (other != slot && workers_[other].pid > 0) return std::nullopt;
      }
      pick = second_.begin();
    }
    SeedTask t = *pick;
    second_.erase(pick);
    return t;
  }

  void Feed(size_t slot) {
    Worker& w = workers_[slot];
    std::optional<SeedTask> t = Next(slot);
    if (!t) {
      Retire(slot);
      return;
    }
    w.busy = *t;
    if (t->pass == 0) first_slot_[t->seed] = slot;
    // A failed write means the worker died; Drain sees EOF and reports it.
    (void)WriteAll(w.task_fd, std::to_string(t->seed) + "\n");
  }

  // Reads what `slot` sent; answers and crashes are reported from here.
  bool Drain(size_t slot, std::string* error) {
    Worker& w = workers_[slot];
    char chunk[65536];
    ssize_t n = read(w.answer_fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) return true;
    if (n > 0) {
      w.buffer.append(chunk, static_cast<size_t>(n));
      size_t newline;
      while (w.busy && (newline = w.buffer.find('\n')) != std::string::npos) {
        std::string line = w.buffer.substr(0, newline);
        w.buffer.erase(0, newline + 1);
        SeedTask done = *w.busy;
        w.busy.reset();
        --remaining_;
        answer_(done, std::move(line));
        Feed(slot);
      }
      return true;
    }
    // EOF (or a read error) with a seed in flight: the worker died.
    SeedTask lost = *w.busy;
    w.busy.reset();
    close(w.task_fd);
    close(w.answer_fd);
    w.task_fd = w.answer_fd = -1;
    int status = 0;
    waitpid(w.pid, &status, 0);
    w.pid = -1;
    --remaining_;
    crash_(lost, DescribeExit(status));
    if (remaining_ == 0 || (first_.empty() && second_.empty())) return true;
    if (!Start(slot, error)) return false;
    Feed(slot);
    return true;
  }

  void Retire(size_t slot) {
    Worker& w = workers_[slot];
    if (w.task_fd >= 0) close(w.task_fd);
    if (w.answer_fd >= 0) close(w.answer_fd);
    w.task_fd = w.answer_fd = -1;
    if (w.pid > 0) waitpid(w.pid, nullptr, 0);
    w.pid = -1;
  }

  void StopAll() {
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (workers_[i].pid > 0 && workers_[i].busy)
        kill(workers_[i].pid, SIGKILL);
      Retire(i);
    }
  }

  const SeedWork& work_;
  const SeedAnswer& answer_;
  const SeedCrash& crash_;
  std::vector<Worker> workers_;
  std::deque<SeedTask> first_, second_;
  std::map<uint64_t, size_t> first_slot_;  // Seed -> slot of its pass-0 run.
  size_t remaining_ = 0;
};

}  // namespace

bool RunInWorkers(const std::vector<SeedTask>& tasks, int jobs,
                  const SeedWork& work, const SeedAnswer& answer,
                  const SeedCrash& crash, std::string* error) {
  if (jobs < 1 || jobs > kJobsMax) {
    *error = "--jobs must be between 1 and " + std::to_string(kJobsMax);
    return false;
  }
  if (tasks.empty()) return true;
  if (static_cast<size_t>(jobs) > tasks.size()) {
    jobs = static_cast<int>(tasks.size());
  }
  Pool pool(work, answer, crash);
  return pool.Run(tasks, jobs, error);
}

}  // namespace softfab::cli
