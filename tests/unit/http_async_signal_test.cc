// AsyncSignal: the engine's output thread wakes a handler coroutine through it, so no wake-up may
// be lost and notifications may coalesce but never vanish.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <thread>

#include "server/http_server.h"

namespace locus::http {
namespace {

namespace net = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST(AsyncSignal, NotifyBeforeWaitCompletesAtOnceAndNotificationsCoalesce) {
  net::io_context io_context;
  AsyncSignal signal(io_context.get_executor());
  int wakes = 0;
  for (int i = 0; i < 10; ++i)
    signal.notify();
  net::co_spawn(
      io_context,
      [&]() -> net::awaitable<void> {
        co_await signal.wait();
        ++wakes;
        co_await signal.wait();
        ++wakes;
      },
      net::detached);
  io_context.run_for(100ms);
  EXPECT_EQ(wakes, 1);  // ten notifies, one wake-up; the second wait is still waiting
  signal.notify();
  io_context.restart();
  io_context.run_for(1000ms);
  EXPECT_EQ(wakes, 2);
}

TEST(AsyncSignal, NoLostWakeupsFromAnotherThread) {
  net::io_context io_context;
  AsyncSignal signal(io_context.get_executor());
  constexpr int kItems = 100000;
  std::atomic<int> produced{0};
  int consumed = 0;
  int wakes = 0;
  net::co_spawn(
      io_context,
      [&]() -> net::awaitable<void> {
        // Every item is produced before its notify, so after the last notify a wait must end
        // and see them all.
        while (consumed < kItems) {
          co_await signal.wait();
          ++wakes;
          consumed = produced.load();
        }
      },
      net::detached);
  std::thread producer([&] {
    for (int i = 0; i < kItems; ++i) {
      produced.fetch_add(1);
      signal.notify();
      if (i % 1000 == 0) std::this_thread::yield();
    }
  });
  std::thread runner([&] { io_context.run_for(5s); });
  producer.join();
  runner.join();
  EXPECT_EQ(consumed, kItems);
  EXPECT_GT(wakes, 0);
  EXPECT_LE(wakes, kItems);
}

TEST(AsyncSignal, PingPongNeverLosesAWakeup) {
  // Each notify races the waiter re-arming: a lost wake-up stalls the producer until the
  // deadline, failing the test.
  net::io_context io_context;
  AsyncSignal signal(io_context.get_executor());
  constexpr int kRounds = 20000;
  std::atomic<int> produced{0};
  std::atomic<int> consumed{0};
  net::co_spawn(
      io_context,
      [&]() -> net::awaitable<void> {
        while (consumed.load() < kRounds) {
          co_await signal.wait();
          consumed.store(produced.load());
        }
      },
      net::detached);
  std::thread runner([&] { io_context.run_for(10s); });
  const auto deadline = Clock::now() + 8s;
  for (int i = 1; i <= kRounds && Clock::now() < deadline; ++i) {
    produced.store(i);
    signal.notify();
    while (consumed.load() < i && Clock::now() < deadline)
      std::this_thread::yield();
  }
  EXPECT_EQ(consumed.load(), kRounds);
  io_context.stop();
  runner.join();
}

TEST(AsyncSignal, SurvivesDestructionWithANotifyInFlight) {
  net::io_context io_context;
  int wakes = 0;
  for (int i = 0; i < 100; ++i) {
    auto signal = std::make_unique<AsyncSignal>(io_context.get_executor());
    net::co_spawn(
        io_context,
        [&wakes, waiter = signal.get()]() -> net::awaitable<void> {
          co_await waiter->wait();
          ++wakes;
        },
        net::detached);
    io_context.restart();  // poll() stops the context when it runs out of work
    io_context.poll();     // the waiter is suspended now
    std::thread notifier([&] { signal->notify(); });
    notifier.join();
    // The coroutine's frame keeps the state alive; the posted wake-up still runs.
    signal.reset();
    io_context.restart();
    io_context.poll();
  }
  EXPECT_EQ(wakes, 100);
}

}  // namespace
}  // namespace locus::http
