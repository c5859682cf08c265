#include "text_session_host.h"

#include "analysis/text_analysis_session.h"
#include "worker_queue.h"

namespace mumoe::ui {

TextSessionHost::TextSessionHost(QObject* parent) : QObject(parent), worker_(new WorkerQueue(this)) {}

TextSessionHost::~TextSessionHost() { shutdown(); }

void TextSessionHost::shutdown() { worker_->shutdown(); }

std::string TextSessionHost::sessionKey(const analysis::TextSessionOptions& o) {
  // '\n' cannot occur in a path or SPEC the GUI passes, so the fields cannot run into each other.
  return o.model_path + '\n' + o.data_spec + '\n' + o.cache_path + '\n' + o.device + '\n' + o.tokenizer + '\n' +
         std::to_string(o.max_sequences) + '\n' + std::to_string(o.validation_fraction) + '\n' +
         std::to_string(o.n_head);
}

analysis::TextAnalysisSession& TextSessionHost::session(const analysis::TextSessionOptions& options,
                                                        const std::function<bool()>& cancelled) {
  const auto key = sessionKey(options);
  if (session_ && key == key_ &&
      (options.layer == openedAs_ || options.layer == session_->layer_name() ||
       options.layer == std::to_string(session_->layer_index())))
    return *session_;
  // Close before opening: a GPT-2-sized model and its arrays are not held twice.
  session_.reset();
  key_.clear();
  const QString extracting = tr("Extracting tokens");
  session_ = analysis::TextAnalysisSession::open_extracted(options, [&](const analysis::ExtractionProgress& p) {
    worker_->postProgress(extracting, p.samples_done, p.samples_total, p.eta_seconds);
    return !cancelled();
  });
  ++opened_;
  key_ = key;
  openedAs_ = options.layer;
  return *session_;
}

void TextSessionHost::release() {
  session_.reset();
  key_.clear();
  openedAs_.clear();
}

}  // namespace mumoe::ui
