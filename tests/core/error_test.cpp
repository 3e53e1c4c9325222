// Status / Result<T> / Error: success and failure paths, context prefixes, code names,
// move-only semantics and (debug builds) the aborts for unchecked failures.
#include "core/error.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace kvf {
namespace {

static_assert(!std::is_copy_constructible_v<Status>);
static_assert(!std::is_copy_assignable_v<Status>);
static_assert(std::is_nothrow_move_constructible_v<Status>);
static_assert(std::is_nothrow_move_assignable_v<Status>);
static_assert(!std::is_copy_constructible_v<Result<int>>);
static_assert(!std::is_copy_assignable_v<Result<int>>);
static_assert(std::is_nothrow_move_constructible_v<Result<int>>);
static_assert(std::is_move_constructible_v<Result<std::unique_ptr<int>>>);
// Error itself is a plain value type.
static_assert(std::is_copy_constructible_v<Error>);

Status fail_if(bool fail) {
  if (fail) return invalid_input("bad value ", 42);
  return {};
}

Result<int> half_of(int x) {
  if (x % 2 != 0) return invalid_input(x, " is odd");
  return x / 2;
}

// A caller that propagates with context, the way loaders do.
Result<int> quarter_of(int x) {
  Result<int> h = half_of(x);
  if (!h) return h.take_error().context("halving ", x);
  Result<int> q = half_of(*h);
  if (!q) return q.take_error().context("halving ", *h);
  return *q;
}

TEST(Error, CodeAndMessage) {
  Error e(ErrorCode::kCapacity, "pool is full");
  EXPECT_EQ(e.code(), ErrorCode::kCapacity);
  EXPECT_EQ(e.message(), "pool is full");
  EXPECT_EQ(e.to_string(), "capacity: pool is full");
}

TEST(Error, HelpersSetCodesAndConcatenate) {
  EXPECT_EQ(invalid_input("a", 1, "b").code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(invalid_input("a", 1, "b").message(), "a1b");
  EXPECT_EQ(unsupported("x").code(), ErrorCode::kUnsupported);
  EXPECT_EQ(capacity("x").code(), ErrorCode::kCapacity);
  EXPECT_EQ(internal_error("x").code(), ErrorCode::kInternal);
  EXPECT_EQ(str_cat("n=", 3, ", f=", 1.5, ", c=", 'z'), "n=3, f=1.5, c=z");
}

TEST(Error, CodeNames) {
  EXPECT_EQ(error_code_name(ErrorCode::kInvalidInput), "invalid input");
  EXPECT_EQ(error_code_name(ErrorCode::kUnsupported), "unsupported");
  EXPECT_EQ(error_code_name(ErrorCode::kCapacity), "capacity");
  EXPECT_EQ(error_code_name(ErrorCode::kValidation), "validation failed");
  EXPECT_EQ(error_code_name(ErrorCode::kInternal), "internal error");
  // Every code has a distinct name.
  const ErrorCode all[] = {ErrorCode::kInvalidInput, ErrorCode::kUnsupported, ErrorCode::kCapacity,
                           ErrorCode::kValidation, ErrorCode::kInternal};
  for (ErrorCode a : all) {
    for (ErrorCode b : all) {
      if (a != b) {
        EXPECT_NE(error_code_name(a), error_code_name(b));
      }
    }
  }
}

TEST(Error, ContextPrefixes) {
  Error e = invalid_input("bad magic");
  Error c = std::move(e).context("loading ", "x.gguf");
  EXPECT_EQ(c.message(), "loading x.gguf: bad magic");
  EXPECT_EQ(c.code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(c.to_string(), "invalid input: loading x.gguf: bad magic");
  // Stacked contexts read outermost first.
  Error d = std::move(c).context("model ", 7);
  EXPECT_EQ(d.message(), "model 7: loading x.gguf: bad magic");
}

TEST(Error, ContextOnConstLvalueCopies) {
  const Error e = unsupported("no avx");
  Error c = e.context("kernel");
  EXPECT_EQ(c.message(), "kernel: no avx");
  EXPECT_EQ(c.code(), ErrorCode::kUnsupported);
  EXPECT_EQ(e.message(), "no avx");  // the original is untouched
}

TEST(Status, SuccessByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(static_cast<bool>(s));
  EXPECT_TRUE(fail_if(false).ok());
}

TEST(Status, Failure) {
  Status s = fail_if(true);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(static_cast<bool>(s));
  EXPECT_EQ(s.error().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(s.error().message(), "bad value 42");
  Error e = s.take_error();
  EXPECT_EQ(e.message(), "bad value 42");
}

TEST(Status, IgnoreDropsAFailure) {
  Status s = fail_if(true);
  s.ignore();  // must not abort on destruction in debug builds
}

TEST(Status, MoveTransfersTheFailure) {
  Status a = fail_if(true);
  Status b = std::move(a);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message(), "bad value 42");
  Status c;
  c = std::move(b);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.take_error().code(), ErrorCode::kInvalidInput);
}

TEST(Status, MoveAssignOverSuccess) {
  Status c;
  EXPECT_TRUE(c.ok());
  c = fail_if(true);
  EXPECT_FALSE(c.ok());
  c = Status();
  EXPECT_TRUE(c.ok());
}

TEST(Result, Value) {
  Result<int> r = half_of(10);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(static_cast<bool>(r));
  EXPECT_EQ(r.value(), 5);
  EXPECT_EQ(*r, 5);
  r.value() = 9;  // value() is a mutable reference
  EXPECT_EQ(*r, 9);
}

TEST(Result, Failure) {
  Result<int> r = half_of(7);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidInput);
  EXPECT_EQ(r.error().message(), "7 is odd");
  Error e = r.take_error();
  EXPECT_EQ(e.to_string(), "invalid input: 7 is odd");
}

TEST(Result, PropagationWithContext) {
  Result<int> ok = quarter_of(12);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 3);

  Result<int> first = quarter_of(5);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().message(), "halving 5: 5 is odd");

  Result<int> second = quarter_of(6);  // 6 -> 3, then 3 is odd
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().message(), "halving 3: 3 is odd");
}

TEST(Result, ArrowAndMoveOnlyPayload) {
  Result<std::string> s = std::string("hello");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 5u);

  Result<std::unique_ptr<int>> p = std::make_unique<int>(17);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> owned = std::move(p).value();
  ASSERT_NE(owned, nullptr);
  EXPECT_EQ(*owned, 17);
}

TEST(Result, MoveKeepsStateAndCheckedFlag) {
  Result<int> a = half_of(3);
  Result<int> b = std::move(a);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message(), "3 is odd");

  Result<int> c = half_of(8);
  c = half_of(20);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 10);
}

TEST(Result, StatusOf) {
  Result<int> good = half_of(4);
  Status gs = good.status();
  EXPECT_TRUE(gs.ok());

  Result<int> bad = half_of(5);
  Status bs = bad.status();
  ASSERT_FALSE(bs.ok());
  EXPECT_EQ(bs.error().message(), "5 is odd");
}

TEST(Result, FromFailedStatus) {
  Status s = fail_if(true);
  ASSERT_FALSE(s.ok());
  Result<int> r(std::move(s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message(), "bad value 42");
}

TEST(Result, CheckedErrorMayBeDropped) {
  Result<int> r = half_of(1);
  EXPECT_FALSE(r.ok());  // looked at: destroying it is fine
}

#ifndef NDEBUG
using ErrorDeathTest = ::testing::Test;

TEST(ErrorDeathTest, UncheckedFailedStatusAborts) {
  EXPECT_DEATH({ Status s = fail_if(true); }, "unchecked");
}

TEST(ErrorDeathTest, UncheckedFailedResultAborts) {
  EXPECT_DEATH({ Result<int> r = half_of(3); }, "unchecked");
}

TEST(ErrorDeathTest, OverwritingUncheckedFailureAborts) {
  EXPECT_DEATH(
      {
        Status s = fail_if(true);
        s = Status();
      },
      "unchecked");
}

TEST(ErrorDeathTest, ValueBeforeOkAborts) {
  EXPECT_DEATH(
      {
        Result<int> r = half_of(4);
        volatile int v = r.value();
        (void)v;
      },
      "before ok");
}

TEST(ErrorDeathTest, ValueOfFailureAborts) {
  EXPECT_DEATH(
      {
        Result<int> r = half_of(5);
        (void)r.ok();
        volatile int v = *r;
        (void)v;
      },
      "5 is odd");
}

TEST(ErrorDeathTest, ErrorOfSuccessAborts) {
  EXPECT_DEATH(
      {
        Status s;
        (void)s.ok();
        (void)s.error();
      },
      "on success");
  EXPECT_DEATH(
      {
        Result<int> r = 1;
        (void)r.ok();
        (void)r.take_error();
      },
      "on a value");
}

TEST(ErrorDeathTest, UncheckedSuccessIsFine) {
  // Only failures must be looked at.
  Status s;
  Result<int> r = 3;
}
#endif  // NDEBUG

}  // namespace
}  // namespace kvf
