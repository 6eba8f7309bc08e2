// Buffer (kernels/cpu/buffer.h): 64-byte aligned storage; a freed large block goes to the
// next Buffer of about its size, a small one or one of a far size does not get it.
#include "kernels/cpu/buffer.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace attnscope::cpu {
namespace {

constexpr size_t kLarge = kPooledBytes / sizeof(float) * 3;  // 3 pooled minima of floats

bool aligned64(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 64 == 0;
}

TEST(Buffer, a_freed_large_block_serves_the_next_buffer_of_about_its_size) {
  const float* first = nullptr;
  {
    Buffer<float> a(kLarge);
    first = a.data();
    EXPECT_TRUE(aligned64(first));
  }
  {
    Buffer<float> b(kLarge - 1000);  // within [size / 2, size]: the pooled block
    EXPECT_EQ(b.data(), first);
    Buffer<float> c(kLarge);  // the pooled block is taken: a new one
    EXPECT_NE(c.data(), first);
    EXPECT_TRUE(aligned64(c.data()));
  }
  Buffer<float> far(kLarge / 3);  // less than half of every pooled block: a new one
  EXPECT_NE(far.data(), first);
  Buffer<float> larger(kLarge * 2);  // larger than every pooled block
  EXPECT_NE(larger.data(), first);
}

TEST(Buffer, small_blocks_are_not_pooled_and_keep_their_values) {
  Buffer<uint32_t> small(100);
  EXPECT_TRUE(aligned64(small.data()));
  for (uint32_t i = 0; i < 100; ++i) small[i] = i;
  small.resize(5000);  // grows by reallocation: the old values move along
  for (uint32_t i = 0; i < 100; ++i) ASSERT_EQ(small[i], i);
  Buffer<float> ones(kLarge, 1.0f);  // an explicit value still initialises
  EXPECT_EQ(ones.front(), 1.0f);
  EXPECT_EQ(ones.back(), 1.0f);
}

}  // namespace
}  // namespace attnscope::cpu
