// Image data sets stored as image files, decoded with OpenCV: ImageFolder and the CelebA layout.
#pragma once

#include <string>

#include "data/image_data.h"

namespace mumoe::data {

/// How decoded images become tensors.
struct ImageDecodeOptions {
  int64_t channels = 0;  ///< 1 (grey) or 3 (RGB); 0 = whatever the first image has
  int64_t size = 0;      ///< resize to size × size; 0 = all images must share the first one's size
};

/// ImageFolder: DIR/<class>/<image>, one sub-folder per class (classes sorted by name; files
/// with the extensions jpg, jpeg, png, bmp). Throws FileError naming an unreadable image, a
/// folder without classes, or an image whose size differs when no resize was asked for.
LabelledImages load_image_folder(const std::string& dir, const ImageDecodeOptions& options = {});

/// CelebA: DIR/img_align_celeba/*.jpg, DIR/list_attr_celeba.txt (count, 40 names, one ±1 row per
/// image), DIR/list_eval_partition.txt (image, 0 train / 1 valid / 2 test). The samples of
/// `split` carry all attributes as 0/1; labels are all 0 with the single class "face" (the tasks
/// are chosen among the attributes later). Throws FileError naming the file and line for a wrong
/// column count, a value other than ±1, an image missing from the attribute file, or an
/// unreadable image.
LabelledImages load_celeba(const std::string& dir, const std::string& split, const ImageDecodeOptions& options = {});

/// The images of load_image_folder and load_celeba, listed and checked but not decoded: the
/// result streams them (`stream` set, `images` undefined). The first image is decoded to decide
/// the channel count (grey stays grey, anything else becomes RGB) and to catch an unreadable
/// folder early; the others are decoded when a batch needs them.
LabelledImages open_image_folder(const std::string& dir);
LabelledImages open_celeba(const std::string& dir, const std::string& split);

}  // namespace mumoe::data
