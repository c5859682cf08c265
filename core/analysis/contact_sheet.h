// Expert galleries as PNG contact sheets (paper Fig. 2): a grid of the gallery's images, each
// with its class label (white) and the expert coefficient (green) overlaid, under a title line.
// Needs OpenCV (built only when it is found).
#pragma once

#include <string>
#include <vector>

#include "analysis/analysis_session.h"

namespace mumoe::analysis {

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

/// Renders and writes atomically. Throws WriteError naming the path.
void write_contact_sheet(const std::string& path, const std::string& title,
                         const std::vector<ContactSheetTile>& tiles, const ContactSheetStyle& style = {});

}  // namespace mumoe::analysis
