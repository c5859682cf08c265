// Expert galleries as PNG contact sheets (paper Fig. 2): a grid of the gallery's images, each
// with its class label (white) and the expert coefficient (green) overlaid, under a title line.
// Needs OpenCV (built only when it is found).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "analysis/analysis_session.h"
#include "analysis/gallery.h"

namespace mumoe::analysis {

class VitBlockAnalysis;

struct ContactSheetTile {
  SampleImage image;
  std::string label;    ///< drawn in white at the top
  std::string caption;  ///< drawn in green at the bottom (the coefficient)
};

struct ContactSheetStyle {
  int tile_size = 112;  ///< images are scaled (nearest neighbour for small images) to this square
  int columns = 8;
};

/// Encodes the sheet as PNG bytes. Throws UsageError when there is nothing to draw.
std::vector<unsigned char> render_contact_sheet(const std::string& title, const std::vector<ContactSheetTile>& tiles,
                                                const ContactSheetStyle& style = {});

/// One image as a PNG thumbnail for the HTML report: scaled down (area) so that its longer side is
/// `size` when it is larger, else as it is (the page scales it up); grey stays grey. Empty for an
/// empty image.
std::string encode_thumbnail_png(const SampleImage& image, int size);

/// Renders and writes atomically. Throws WriteError naming the path.
void write_contact_sheet(const std::string& path, const std::string& title,
                         const std::vector<ContactSheetTile>& tiles, const ContactSheetStyle& style = {});

/// The title of a gallery's sheet: "expert 5 (mode 0), top 16 of 812 · SOURCE" (or "16 random
/// with a >= 0.50 of 812"; SOURCE left out when empty).
std::string gallery_sheet_title(const Gallery& gallery, const std::string& source);

/// The one way the CLI and the GUI draw a gallery: a tile per item (`image_of(item)`, labelled
/// with its class name from `class_names` or "class N", the coefficient to two decimals), titled
/// by gallery_sheet_title, written atomically. `cancelled` (may be empty) is polled between
/// images and throws Cancelled. Throws UsageError for an empty gallery, WriteError naming the path.
void write_gallery_sheet(const std::string& path, const Gallery& gallery, const std::vector<std::string>& class_names,
                         const std::function<SampleImage(const GalleryItem&)>& image_of, const std::string& source,
                         const std::function<bool()>& cancelled = {});

/// Called after each image drawn; false cancels (Cancelled).
using SheetProgress = std::function<bool(int64_t drawn, int64_t total)>;

/// A head's gallery as its sheet — what `mumoe gallery --output` and the GUI's Export View write:
/// the session's images (sample_image), titled with its data set. Throws UsageError naming the
/// data when it holds no images (features: give gallery_images).
void write_gallery_sheet(const std::string& path, const AnalysisSession& session, const Gallery& gallery,
                         const SheetProgress& progress = {});
/// A ViT block's gallery: each image with its strongest patch outlined, titled
/// "<layer>, strongest patch per image".
void write_gallery_sheet(const std::string& path, const VitBlockAnalysis& block, const Gallery& gallery,
                         const SheetProgress& progress = {});

}  // namespace mumoe::analysis
