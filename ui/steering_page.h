// SteeringPage: steer a byte-level μMoE GPT with one expert and read the result beside the
// unsteered text (paper App. G.2; definitions in core/analysis/lm_steering.h).
//
// Self-contained: the page owns its own TextAnalysisSession (core/analysis/text_analysis_session.h)
// and a one-thread pool; every call into the session — opening it, the per-token extraction
// that the cluster centre needs (cached), and both generations — runs on that worker through
// QtConcurrent, so the GUI thread never waits on the model. Results come back through a
// QFutureWatcher; a generation asked for while one runs is refused (the button is disabled).
//
// Torch-free header.
#pragma once

#include <QFutureWatcher>
#include <QString>
#include <QThreadPool>
#include <QWidget>

#include <memory>

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QPushButton;
class QSlider;
class QSpinBox;

namespace mumoe::ui {

class SteeringPage : public QWidget {
  Q_OBJECT

 public:
  explicit SteeringPage(QWidget* parent = nullptr);
  /// Waits for a running job.
  ~SteeringPage() override;

  /// The GPT and the text SPEC whose validation split gives the cluster centres ("" =
  /// "fortunes"). Reads the model's layers and experts on the worker (modelLoaded() follows, or
  /// failed()) and clears both panes.
  void setModel(const QString& gptModelPath, const QString& dataSpec);
  /// Analysis cache file ("" = the core's default, which honours $MUMOE_CACHE).
  void setCachePath(const QString& path);

  // The controls, for the main window, shortcuts and tests.
  void setLayer(int layer);
  void setExpert(int expert);
  void setAlpha(double alpha);
  void setPrompt(const QString& prompt);
  void setTokenCount(int tokens);
  void setSeed(int seed);
  int layerCount() const { return layers_; }
  int expertCount() const { return experts_; }
  bool isBusy() const;
  /// Prompt + generated text of the last generation (decoded as UTF-8).
  QString unsteeredText() const;
  QString steeredText() const;
  QString statusText() const;

 public Q_SLOTS:
  /// Runs both generations on the worker with the current controls; generationFinished() or
  /// failed() follows. Does nothing while a job runs or before a model is set.
  void generate();

 Q_SIGNALS:
  void modelLoaded(int layers, int experts);
  /// Both panes are filled: prompt + unsteered continuation, prompt + steered continuation.
  void generationFinished(const QString& unsteered, const QString& steered);
  void failed(const QString& message);
  void busyChanged(bool busy);

 private:
  struct Worker;
  struct Outcome;
  void onDescribed();
  void onGenerated();
  void setBusy(bool busy);

  QThreadPool pool_;
  std::shared_ptr<Worker> worker_;  ///< touched on the worker thread only
  QFutureWatcher<std::shared_ptr<Outcome>> describeWatcher_;
  QFutureWatcher<std::shared_ptr<Outcome>> generateWatcher_;
  QString modelPath_, dataSpec_, cachePath_;
  int layers_ = 0, experts_ = 0;
  int pendingLayer_ = -1, pendingExpert_ = -1;
  int describeGeneration_ = 0;
  bool busy_ = false;

  QComboBox* layer_ = nullptr;
  QSpinBox* expert_ = nullptr;
  QSlider* alphaSlider_ = nullptr;
  QDoubleSpinBox* alpha_ = nullptr;
  QComboBox* site_ = nullptr;
  QDoubleSpinBox* threshold_ = nullptr;
  QLineEdit* prompt_ = nullptr;
  QSpinBox* tokens_ = nullptr;
  QSpinBox* seed_ = nullptr;
  QPushButton* generate_ = nullptr;
  QLabel* status_ = nullptr;
  QPlainTextEdit* unsteered_ = nullptr;
  QPlainTextEdit* steered_ = nullptr;
};

}  // namespace mumoe::ui
