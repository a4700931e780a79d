// Progress: quarter lines when the output is not a terminal, the bar text, and nothing when off.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/progress.h"

namespace locus {
namespace {

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[256];
  while (std::fgets(buf, sizeof buf, f) != nullptr)
    s += buf;
  return s;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

TEST(Progress, LinesAtEachQuarterAndOnlyThere) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("Loading weights", 50, "layers", Progress::Mode::kLines, f);
    for (int i = 0; i < 50; ++i)
      p.advance(1, 1'000'000);
  }
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_EQ(count(out, "\n"), 4) << out;
  EXPECT_NE(out.find("Loading weights  26% |"), std::string::npos) << out;  // 13/50
  EXPECT_NE(out.find(" 50% |"), std::string::npos) << out;
  EXPECT_NE(out.find(" 76% |"), std::string::npos) << out;  // 38/50
  EXPECT_NE(out.find("100% |##############################| 50/50 layers ["), std::string::npos)
      << out;
  EXPECT_NE(out.find(" GB/s]"), std::string::npos) << out;
}

TEST(Progress, StoppedEarlySaysWhere) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("Loading weights", 10, "layers", Progress::Mode::kLines, f);
    p.advance(3);  // one quarter line at 3/10, then a failure ends the load
  }
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_EQ(count(out, "\n"), 2) << out;
  EXPECT_NE(out.find(" 30% |#########                     | 3/10 layers ["), std::string::npos)
      << out;
  EXPECT_EQ(out.find("GB/s"), std::string::npos) << out;  // no bytes, no rate
}

TEST(Progress, BarRedrawsInPlaceAndOffPrintsNothing) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("Loading", 4, "layers", Progress::Mode::kBar, f);
    for (int i = 0; i < 4; ++i)
      p.advance();
  }
  const std::string out = read_all(f);
  EXPECT_EQ(out.front(), '\r');
  EXPECT_EQ(count(out, "\n"), 1) << out;  // one final newline after the last redraw
  EXPECT_NE(out.find("4/4 layers"), std::string::npos) << out;
  std::fclose(f);

  std::FILE* g = std::tmpfile();
  ASSERT_NE(g, nullptr);
  {
    Progress p("Loading", 4, "layers", Progress::Mode::kOff, g);
    p.advance(4);
  }
  EXPECT_EQ(read_all(g), "");
  std::fclose(g);
}

}  // namespace
}  // namespace locus
