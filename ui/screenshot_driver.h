// ScreenshotDriver: `mumoe-studio --screenshot FILE --view VIEW [MODEL]`. Opens the model in a
// MainWindow, drives it to the view (gallery: the most loaded expert selected, its gallery and
// one sample's coefficients loaded; ablation: that expert ablated and the sweep shown), waits
// until every visible thumbnail and chart has its data, renders the window and writes FILE.
// bias: the bias page of a multi-label model (demo 2) with the proposed edit and the blind
// threshold compared; tokens: the token view of a μMoE GPT, the most loaded expert's gallery
// and its ablation; compare: the Compare page with every model given (the first is opened too).
#pragma once

#include <QElapsedTimer>
#include <QObject>
#include <QString>
#include <QTimer>

#include <optional>

namespace mumoe::ui {

class MainWindow;

enum class StudioView { Model, Gallery, Ablation, Bias, Tokens, Steering, Compare };

/// "model", "gallery", "ablation", "bias", "tokens", "steering", "compare"; nullopt for anything else.
std::optional<StudioView> parseStudioView(const QString& name);
/// Every view is available now (kept for callers that ask).
bool studioViewAvailable(StudioView view);

class ScreenshotDriver : public QObject {
  Q_OBJECT

 public:
  ScreenshotDriver(MainWindow* window, StudioView view, QString outputPath, int timeoutMs = 180'000,
                   QObject* parent = nullptr);
  /// Opens `modelPath` and goes; finished() follows exactly once. The compare view also adds
  /// `compared` (which should include `modelPath`) to the Compare page once the model is open.
  /// `layer` (optional) is analysed instead of the model's first μMoE layer (e.g. a ViT
  /// block's "blocks.3.mlp").
  void start(const QString& modelPath, const QStringList& compared = {}, const QString& layer = {});
  /// The gallery and ablation views' gallery shows only this subpopulation of the data's
  /// attributes ("long_sleeves=1&frame=1"; set before start()), top-ranked.
  void setGallerySubpopulation(const QString& text) { subpopulation_ = text; }

 Q_SIGNALS:
  /// exitCode 0: written; otherwise message says what went wrong.
  void finished(int exitCode, const QString& message);

 private:
  void onStatistics();
  void poll();
  bool ready();
  void finish(int code, const QString& message);

  MainWindow* window_;
  StudioView view_;
  QString output_;
  QTimer poll_;
  QTimer timeout_;
  QElapsedTimer clock_;
  qint64 expert_ = -1;
  bool statisticsSeen_ = false;
  bool sweepSeen_ = false;
  bool ablationSeen_ = false;
  bool done_ = false;
  bool biasCompared_ = false;
  bool comparisonSeen_ = false;
  bool tokenAblated_ = false;
  bool steered_ = false;         ///< the steering view asked for its generation
  bool generationSeen_ = false;
  int stableTicks_ = 0;
  QStringList compared_;
  QString comparedLayer_;  ///< the layer the Compare view compares (--layer)
  QString subpopulation_;  ///< the gallery's (--subpop), "" = every sample
  int comparedSeen_ = 0;
};

}  // namespace mumoe::ui
