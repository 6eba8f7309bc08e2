// Dumps that grow while they are open (issue 21): a DumpReader keeps no HDF5 handle between
// reads, so the process may reopen the file for writing while a reader exists, and a reader
// opened after an append sees the new case (HDF5 would otherwise share the first reader's
// cached metadata with it); the first reader still loads its cases.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>

#include "core/io/hdf5_dump.h"
#include "io_test_util.h"

namespace attnscope {
namespace {

TEST(LiveFile, reader_opened_after_an_append_sees_the_new_case) {
  const std::string path =
      test::write_one("live_append.h5", "/a",
                      test::make_case({1, 2, 2, 4, 4, 8, 8}, DType::f32, Layout::bhsd, true));
  const DumpReader first = test::open_ok(path);
  ASSERT_EQ(first.cases().size(), 1u);
  {  // An append while `first` exists: HDF5 refuses a read-write open of a file this process
     // holds open read-only, so this succeeds only because no handle is kept.
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(file, 0);
    ASSERT_GE(H5Ocopy(file, "/a", file, "/b", H5P_DEFAULT, H5P_DEFAULT), 0);
    H5Fclose(file);
  }
  const DumpReader second = test::open_ok(path);
  ASSERT_EQ(second.cases().size(), 2u);
  EXPECT_EQ(second.cases()[1].path, "/b");
  Result<CaseData> b = second.load("/b");
  ASSERT_TRUE(b.ok()) << b.error().describe();
  Result<CaseData> a = first.load("/a");
  ASSERT_TRUE(a.ok()) << a.error().describe();
  for (const auto& [name, tensor] : a->tensors) {
    test::expect_same_tensor(tensor, b->tensors.at(name), name);
  }
}

}  // namespace
}  // namespace attnscope
