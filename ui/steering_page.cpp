#include "steering_page.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFontDatabase>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QTextCursor>
#include <QVBoxLayout>

#include <cmath>
#include <exception>

#include "analysis/lm_steering.h"
#include "analysis/text_analysis_session.h"
#include "text_session_host.h"
#include "worker_queue.h"

namespace mumoe::ui {

namespace {
// Marks `edit`'s text from `position` on (where the two generations part): what steering changed.
void markFrom(QPlainTextEdit* edit, int position, const QColor& background) {
  QTextCursor cursor(edit->document());
  cursor.setPosition(std::min(position, edit->document()->characterCount() - 1));
  cursor.movePosition(QTextCursor::End, QTextCursor::KeepAnchor);
  QTextCharFormat format;
  format.setBackground(background);
  cursor.mergeCharFormat(format);
}
}  // namespace

namespace {

constexpr double kAlphaSliderScale = 10.0;  // slider steps of 0.1

/// The page's jobs on the shared queue carry this topic: the page cancels and drops only its own.
const QString kSteeringTopic = QStringLiteral("steering");

}  // namespace

SteeringPage::SteeringPage(TextSessionHost* host, QWidget* parent)
    : QWidget(parent), host_(host ? host : new TextSessionHost(this)), ownsHost_(host == nullptr) {

  layer_ = new QComboBox;
  layer_->setObjectName(QStringLiteral("steeringLayer"));
  expert_ = new QSpinBox;
  expert_->setObjectName(QStringLiteral("steeringExpert"));
  expert_->setRange(0, 0);
  alphaSlider_ = new QSlider(Qt::Horizontal);
  alphaSlider_->setObjectName(QStringLiteral("steeringAlphaSlider"));
  alphaSlider_->setRange(-200, 200);
  alpha_ = new QDoubleSpinBox;
  alpha_->setObjectName(QStringLiteral("steeringAlpha"));
  alpha_->setRange(-20, 20);
  alpha_->setDecimals(2);
  alpha_->setSingleStep(0.5);
  alpha_->setToolTip(tr("Strength α: α × the expert's cluster centre is added at its MLP block (0 = unsteered)"));
  site_ = new QComboBox;
  site_->setObjectName(QStringLiteral("steeringSite"));
  site_->addItem(tr("μMoE input (paper)"), QStringLiteral("mlp-input"));
  site_->addItem(tr("residual stream"), QStringLiteral("residual"));
  site_->setToolTip(tr("μMoE input: only the expert layer sees the shift (App. G.2). Residual stream: the shift also "
                       "reaches the blocks above."));
  threshold_ = new QDoubleSpinBox;
  threshold_->setObjectName(QStringLiteral("steeringThreshold"));
  threshold_->setRange(0.01, 1.0);
  threshold_->setSingleStep(0.05);
  threshold_->setValue(0.5);
  threshold_->setToolTip(tr("Cluster centre = mean MLP input of the evaluation tokens with a_n ≥ this"));
  prompt_ = new QLineEdit(QStringLiteral("The "));
  prompt_->setObjectName(QStringLiteral("steeringPrompt"));
  tokens_ = new QSpinBox;
  tokens_->setObjectName(QStringLiteral("steeringTokens"));
  tokens_->setRange(1, 4000);
  tokens_->setValue(200);
  seed_ = new QSpinBox;
  seed_->setObjectName(QStringLiteral("steeringSeed"));
  seed_->setRange(0, 1'000'000'000);
  generate_ = new QPushButton(tr("Generate"));
  generate_->setObjectName(QStringLiteral("steeringGenerate"));
  generate_->setEnabled(false);
  status_ = new QLabel(tr("No model"));
  status_->setObjectName(QStringLiteral("steeringStatus"));
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse);

  auto* alphaRow = new QHBoxLayout;
  alphaRow->addWidget(alphaSlider_, 1);
  alphaRow->addWidget(alpha_);
  auto* form = new QFormLayout;
  form->addRow(tr("Layer"), layer_);
  form->addRow(tr("Expert"), expert_);
  form->addRow(tr("α"), alphaRow);
  form->addRow(tr("Added to"), site_);
  form->addRow(tr("Centre: a_n ≥"), threshold_);
  auto* form2 = new QFormLayout;
  form2->addRow(tr("Prompt"), prompt_);
  form2->addRow(tr("Bytes"), tokens_);
  form2->addRow(tr("Seed"), seed_);
  auto* controls = new QHBoxLayout;
  controls->addLayout(form, 1);
  controls->addLayout(form2, 1);
  auto* buttonColumn = new QVBoxLayout;
  buttonColumn->addWidget(generate_);
  buttonColumn->addStretch(1);
  controls->addLayout(buttonColumn);

  const auto mono = QFontDatabase::systemFont(QFontDatabase::FixedFont);
  auto pane = [&](const QString& title, const QString& name, QPlainTextEdit*& edit) {
    auto* box = new QGroupBox(title);
    edit = new QPlainTextEdit;
    edit->setObjectName(name);
    edit->setReadOnly(true);
    edit->setFont(mono);
    auto* l = new QVBoxLayout(box);
    l->addWidget(edit);
    return box;
  };
  auto* panes = new QSplitter(Qt::Horizontal);
  panes->addWidget(pane(tr("Unsteered"), QStringLiteral("steeringUnsteered"), unsteered_));
  panes->addWidget(pane(tr("Steered"), QStringLiteral("steeringSteered"), steered_));

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(controls);
  layout->addWidget(status_);
  layout->addWidget(panes, 1);

  connect(alphaSlider_, &QSlider::valueChanged, this, [this](int v) {
    const QSignalBlocker block(alpha_);
    alpha_->setValue(v / kAlphaSliderScale);
  });
  connect(alpha_, &QDoubleSpinBox::valueChanged, this, [this](double v) {
    const QSignalBlocker block(alphaSlider_);
    alphaSlider_->setValue(static_cast<int>(std::lround(v * kAlphaSliderScale)));
  });
  setAlpha(4.0);
  connect(generate_, &QPushButton::clicked, this, &SteeringPage::generate);
  connect(prompt_, &QLineEdit::returnPressed, this, &SteeringPage::generate);
}

SteeringPage::~SteeringPage() {
  if (ownsHost_) {
    host_->shutdown();  // closing must not wait for a whole first extraction: it is cancelled
  } else if (host_) {
    worker()->cancel(kSteeringTopic);  // a shared host outlives the page: its answers must not reach it
    worker()->invalidate(kSteeringTopic);
  }
}

WorkerQueue* SteeringPage::worker() const { return host_->worker(); }

void SteeringPage::setModel(const QString& gptModelPath, const QString& dataSpec) {
  modelPath_ = gptModelPath;
  dataSpec_ = dataSpec.isEmpty() ? QStringLiteral("fortunes") : dataSpec;
  layers_ = experts_ = 0;
  unsteered_->clear();
  steered_->clear();
  divergence_ = -1;
  generate_->setEnabled(false);
  status_->setText(tr("Reading %1 …").arg(gptModelPath));
  // The previous model's work is over: a generation still running is cancelled, and every answer
  // on its way is dropped (the queue's one staleness rule, worker_queue.h), so no text of the old
  // model appears under the new one; the page is free again.
  worker()->cancel(kSteeringTopic);
  worker()->invalidate(kSteeringTopic);
  setBusy(false);
  const auto path = gptModelPath.toStdString();
  WorkerQueue::Handlers reading;
  reading.topic = kSteeringTopic;
  // Reading the header is quick and not worth a progress bar; its errors are the page's to show.
  worker()->submit(
      tr("Reading the GPT"),
      [this, path](const std::function<bool()>&) -> WorkerQueue::Deliver {
        try {
          const auto summary = analysis::describe_gpt(path);
          const int layers = static_cast<int>(summary.n_layer), experts = static_cast<int>(summary.experts);
          QStringList names;
          for (const auto& name : summary.layer_names) names << QString::fromStdString(name);
          return [this, layers, experts, names](double) {
            layerNames_ = names;
            onDescribed(layers, experts);
          };
        } catch (const std::exception& e) {
          const QString error = QString::fromUtf8(e.what());
          return [this, error](double) {
            status_->setText(tr("Cannot steer this model: %1").arg(error));
            Q_EMIT failed(error);
          };
        }
      },
      /*cancellable=*/false, /*visible=*/false, reading);
}

void SteeringPage::onDescribed(int layers, int experts) {
  layers_ = layers;
  experts_ = experts;
  {
    const QSignalBlocker block(layer_);
    layer_->clear();
    for (int l = 0; l < layers_; ++l) layer_->addItem(l < layerNames_.size() ? layerNames_[l] : QString::number(l));
    layer_->setCurrentIndex(pendingLayer_ >= 0 && pendingLayer_ < layers_ ? pendingLayer_ : layers_ - 1);
  }
  expert_->setRange(0, std::max(0, experts_ - 1));
  if (pendingExpert_ >= 0) expert_->setValue(pendingExpert_);
  generate_->setEnabled(!busy_);
  status_->setText(tr("%1: %2 MLP layers × %3 experts; centres from %4").arg(modelPath_).arg(layers_).arg(experts_).arg(dataSpec_));
  Q_EMIT modelLoaded(layers_, experts_);
}

void SteeringPage::setCachePath(const QString& path) { cachePath_ = path; }

void SteeringPage::setLayer(int layer) {
  pendingLayer_ = layer;
  if (layer >= 0 && layer < layer_->count()) layer_->setCurrentIndex(layer);
}

void SteeringPage::setExpert(int expert) {
  pendingExpert_ = expert;
  expert_->setValue(expert);
}

void SteeringPage::setAlpha(double alpha) { alpha_->setValue(alpha); }
void SteeringPage::setPrompt(const QString& prompt) { prompt_->setText(prompt); }
void SteeringPage::setTokenCount(int tokens) { tokens_->setValue(tokens); }
void SteeringPage::setSeed(int seed) { seed_->setValue(seed); }
bool SteeringPage::isBusy() const { return busy_; }
QString SteeringPage::unsteeredText() const { return unsteered_->toPlainText(); }
QString SteeringPage::steeredText() const { return steered_->toPlainText(); }
QString SteeringPage::statusText() const { return status_->text(); }

void SteeringPage::setBusy(bool busy) {
  if (busy_ == busy) return;
  busy_ = busy;
  generate_->setEnabled(!busy && layers_ > 0);
  Q_EMIT busyChanged(busy);
}

void SteeringPage::generate() {
  if (busy_ || layers_ == 0 || modelPath_.isEmpty()) return;
  analysis::SteeringRequest request;
  request.expert = expert_->value();
  request.alpha = alpha_->value();
  request.prompt = prompt_->text().toStdString();
  request.tokens = tokens_->value();
  request.seed = static_cast<uint64_t>(seed_->value());
  request.centre.threshold = threshold_->value();
  request.site = analysis::parse_steering_site(site_->currentData().toString().toStdString());
  const int layer = layer_->currentIndex();
  // The layer by its name, as the Tokens page asks for it: the two then share the host's session.
  analysis::TextSessionOptions options;
  options.model_path = modelPath_.toStdString();
  options.data_spec = dataSpec_.toStdString();
  options.layer = layer < layerNames_.size() ? layerNames_[layer].toStdString() : std::to_string(layer);
  options.cache_path = cachePath_.toStdString();
  setBusy(true);
  status_->setText(tr("Generating %1 bytes twice (layer %2, expert %3, α = %4) …")
                       .arg(request.tokens)
                       .arg(layer)
                       .arg(request.expert)
                       .arg(request.alpha));
  // A cancelled or failed generation frees the button again; the panes keep the last texts.
  WorkerQueue::Handlers endings;
  endings.topic = kSteeringTopic;
  endings.cancelled = [this] {
    setBusy(false);
    status_->setText(tr("Generation cancelled"));
    Q_EMIT cancelled();
  };
  endings.failed = [this](const QString& message) {
    setBusy(false);
    status_->setText(tr("Steering failed: %1").arg(message));
    Q_EMIT failed(message);
  };
  // The job's body touches only the host and its queue; the answer fills the page.
  TextSessionHost* host = host_;
  worker()->submit(
      tr("Steering"),
      [this, host, request, options](const std::function<bool()>& cancelled) -> WorkerQueue::Deliver {
        auto* queue = host->worker();
        // The session the Tokens page has open when it shows this layer; else a lookup once the
        // layer is in the cache, and the first time a pass over the text.
        auto& session = host->session(options, cancelled);
        const QString generating = QObject::tr("Generating");
        const auto r = session.steer(request, [&](int64_t done, int64_t total) {
          if (done % 8 == 0 || done == total) queue->postProgress(generating, done, total);
          return !cancelled();
        });
        const auto prompt = QString::fromStdString(request.prompt);
        const QString unsteered =
            prompt + QString::fromUtf8(r.unsteered.data(), static_cast<qsizetype>(r.unsteered.size()));
        const QString steered = prompt + QString::fromUtf8(r.steered.data(), static_cast<qsizetype>(r.steered.size()));
        const QString info =
            QObject::tr("%1, expert %2: centre = mean input of %3 tokens with a_n ≥ %4, |c| = %5; α = %6; %7 (%8 s)")
                .arg(QString::fromStdString(r.layer_name))
                .arg(request.expert)
                .arg(r.vector.tokens_used)
                .arg(request.centre.threshold)
                .arg(r.vector.norm, 0, 'f', 3)
                .arg(request.alpha)
                .arg(r.first_difference < 0 ? QObject::tr("the texts are identical")
                                            : QObject::tr("first difference at byte %1").arg(r.first_difference))
                .arg(r.seconds, 0, 'f', 2);
        return [this, unsteered, steered, info](double) {
          setBusy(false);
          unsteered_->setPlainText(unsteered);
          steered_->setPlainText(steered);
          // Where the texts part, both are marked to the end: the common start stays plain.
          int common = 0;
          while (common < unsteered.size() && common < steered.size() && unsteered[common] == steered[common]) ++common;
          divergence_ = unsteered == steered ? -1 : common;
          if (divergence_ >= 0) {
            markFrom(unsteered_, common, QColor(0xec, 0xef, 0xf1));
            markFrom(steered_, common, QColor(0xff, 0xf3, 0xc4));
          }
          status_->setText(info);
          Q_EMIT generationFinished(unsteered, steered);
        };
      },
      /*cancellable=*/true, /*visible=*/true, endings);
}

}  // namespace mumoe::ui
