#include "analysis/contact_sheet.h"
#include "io/number_text.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "io/atomic_file.h"
#include "analysis/vit_block_analysis.h"
#include "io/errors.h"

namespace mumoe::analysis {
namespace {

constexpr int kTitleHeight = 28;
const cv::Scalar kWhite(255, 255, 255), kGreen(80, 230, 80), kBackground(32, 32, 32);

cv::Mat tile_image(const SampleImage& image, int size) {
  cv::Mat out(size, size, CV_8UC3, kBackground);
  if (image.empty()) return out;
  const int type = image.channels == 1 ? CV_8UC1 : CV_8UC3;
  cv::Mat src(static_cast<int>(image.height), static_cast<int>(image.width), type,
              const_cast<uint8_t*>(image.pixels.data()));
  cv::Mat bgr;
  if (image.channels == 1)
    cv::cvtColor(src, bgr, cv::COLOR_GRAY2BGR);
  else
    cv::cvtColor(src, bgr, cv::COLOR_RGB2BGR);
  // Small images (28×28) stay crisp with nearest neighbour; photos look better with area.
  const int interpolation = std::max(image.height, image.width) * 2 <= size ? cv::INTER_NEAREST : cv::INTER_AREA;
  cv::resize(bgr, out, cv::Size(size, size), 0, 0, interpolation);
  return out;
}

// OpenCV's Hershey fonts draw ASCII only and a '?' for every other byte: a middle dot becomes a
// hyphen, any other character outside ASCII one '?' (not one per UTF-8 byte).
std::string hershey_text(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      out += text[i++];
      continue;
    }
    const size_t length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1;
    out += text.compare(i, 2, "\xC2\xB7") == 0 ? '-' : '?';
    i += length;
  }
  return out;
}

void outlined_text(cv::Mat& canvas, const std::string& utf8, cv::Point at, double scale, const cv::Scalar& colour) {
  const auto text = hershey_text(utf8);
  cv::putText(canvas, text, at, cv::FONT_HERSHEY_SIMPLEX, scale, cv::Scalar(0, 0, 0), 3, cv::LINE_AA);
  cv::putText(canvas, text, at, cv::FONT_HERSHEY_SIMPLEX, scale, colour, 1, cv::LINE_AA);
}

}  // namespace

std::string encode_thumbnail_png(const SampleImage& image, int size) {
  if (image.empty()) return "";
  const int type = image.channels == 1 ? CV_8UC1 : CV_8UC3;
  cv::Mat src(static_cast<int>(image.height), static_cast<int>(image.width), type,
              const_cast<uint8_t*>(image.pixels.data()));
  cv::Mat out;
  if (image.channels == 1) out = src;  // grey stays one channel: a third of the bytes
  else cv::cvtColor(src, out, cv::COLOR_RGB2BGR);
  // Larger than the display size: scaled down to it. Smaller (a 28 px Fashion-MNIST image): kept
  // as it is, and the page scales it up without smoothing — a 28 px grey PNG is ~0.6 KB, the same
  // image drawn at 84 px in colour ~6 KB.
  const int longest = static_cast<int>(std::max(image.height, image.width));
  if (longest > size) {
    const double scale = static_cast<double>(size) / longest;
    cv::Mat small;
    cv::resize(out, small, cv::Size(std::max(1, static_cast<int>(std::lround(image.width * scale))),
                                    std::max(1, static_cast<int>(std::lround(image.height * scale)))),
               0, 0, cv::INTER_AREA);
    out = small;
  }
  std::vector<unsigned char> png;
  if (!cv::imencode(".png", out, png, {cv::IMWRITE_PNG_COMPRESSION, 9}))
    throw Error("OpenCV could not encode a thumbnail as PNG");
  return std::string(png.begin(), png.end());
}

std::vector<unsigned char> render_contact_sheet(const std::string& title, const std::vector<ContactSheetTile>& tiles,
                                                const ContactSheetStyle& style) {
  if (tiles.empty()) throw UsageError("the gallery is empty: no samples reach the threshold");
  const int size = style.tile_size, columns = std::min<int>(style.columns, static_cast<int>(tiles.size()));
  const int rows = (static_cast<int>(tiles.size()) + columns - 1) / columns;
  const int gap = 2;
  cv::Mat canvas(kTitleHeight + rows * (size + gap), columns * (size + gap) - gap + 0, CV_8UC3, kBackground);
  outlined_text(canvas, title, cv::Point(6, 19), 0.5, kWhite);
  for (size_t i = 0; i < tiles.size(); ++i) {
    const int r = static_cast<int>(i) / columns, c = static_cast<int>(i) % columns;
    const cv::Rect where(c * (size + gap), kTitleHeight + r * (size + gap), size, size);
    tile_image(tiles[i].image, size).copyTo(canvas(where));
    outlined_text(canvas, tiles[i].label, cv::Point(where.x + 3, where.y + 13), 0.4, kWhite);
    outlined_text(canvas, tiles[i].caption, cv::Point(where.x + 3, where.y + size - 5), 0.4, kGreen);
  }
  std::vector<unsigned char> png;
  if (!cv::imencode(".png", canvas, png)) throw Error("OpenCV could not encode the contact sheet as PNG");
  return png;
}

void write_contact_sheet(const std::string& path, const std::string& title, const std::vector<ContactSheetTile>& tiles,
                         const ContactSheetStyle& style) {
  const auto png = render_contact_sheet(title, tiles, style);
  io::AtomicFileWriter out(path);
  out.write(png.data(), png.size());
  out.commit();
}

std::string gallery_sheet_title(const Gallery& g, const std::string& source) {
  const auto& r = g.request;
  const auto shown = std::to_string(g.items.size());
  return "expert " + std::to_string(r.expert) + " (mode " + std::to_string(r.mode) + "), " +
         (r.order == GalleryOrder::Top ? "top " + shown : shown + " random with a >= " + io::fixed_text(r.threshold, 2)) +
         " of " + std::to_string(g.eligible) + (source.empty() ? "" : " · " + source);
}

void write_gallery_sheet(const std::string& path, const Gallery& g, const std::vector<std::string>& class_names,
                         const std::function<SampleImage(const GalleryItem&)>& image_of, const std::string& source,
                         const std::function<bool()>& cancelled) {
  if (g.items.empty())
    throw UsageError("the gallery of expert " + std::to_string(g.request.expert) + " is empty" +
                     (g.request.order == GalleryOrder::Random
                          ? " (no sample reaches a >= " + io::fixed_text(g.request.threshold, 2) +
                                "; try --order top or a lower --threshold)"
                          : " (no sample gives it a coefficient above 0)") +
                     ": no sheet to draw");
  std::vector<ContactSheetTile> tiles;
  tiles.reserve(g.items.size());
  for (const auto& item : g.items) {
    if (cancelled && cancelled()) throw Cancelled();
    const auto label = g.multilabel ? label_text(item.label, class_names, true)
                       : item.label >= 0 && static_cast<size_t>(item.label) < class_names.size()
                           ? class_names[static_cast<size_t>(item.label)]
                           : "class " + std::to_string(item.label);
    tiles.push_back({image_of(item), label, io::fixed_text(item.coefficient, 2)});
  }
  write_contact_sheet(path, gallery_sheet_title(g, source), tiles);
}

namespace {

/// image_of with progress: counts the images drawn and cancels when `progress` says so.
std::function<SampleImage(const GalleryItem&)> counted(std::function<SampleImage(const GalleryItem&)> image_of,
                                                       const SheetProgress& progress, int64_t total) {
  if (!progress) return image_of;
  return [image_of = std::move(image_of), progress, total, drawn = int64_t{0}](const GalleryItem& item) mutable {
    auto image = image_of(item);
    if (!progress(++drawn, total)) throw Cancelled();
    return image;
  };
}

}  // namespace

void write_gallery_sheet(const std::string& path, const AnalysisSession& session, const Gallery& gallery,
                         const SheetProgress& progress) {
  if (!session.has_gallery_images())
    throw UsageError(session.options().data_spec +
                     " holds features, not images: name the images they were made from (--images SPEC) to draw a "
                     "contact sheet");
  const auto total = static_cast<int64_t>(gallery.items.size());
  write_gallery_sheet(path, gallery, session.class_names(),
                      counted([&](const GalleryItem& item) { return session.sample_image(item.sample); }, progress, total),
                      session.options().data_spec);
}

void write_gallery_sheet(const std::string& path, const VitBlockAnalysis& block, const Gallery& gallery,
                         const SheetProgress& progress) {
  const auto total = static_cast<int64_t>(gallery.items.size());
  write_gallery_sheet(path, gallery, block.class_names(),
                      counted([&](const GalleryItem& item) { return block.image(item.sample, item.patch); }, progress, total),
                      block.layer_name() + ", strongest patch per image");
}

}  // namespace mumoe::analysis
