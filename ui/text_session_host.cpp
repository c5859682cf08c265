#include "text_session_host.h"

#include "analysis/text_analysis_session.h"
#include "worker_queue.h"

namespace mumoe::ui {

TextSessionHost::TextSessionHost(QObject* parent) : QObject(parent), worker_(new WorkerQueue(this)) {}

TextSessionHost::~TextSessionHost() { shutdown(); }

void TextSessionHost::shutdown() { worker_->shutdown(); }

namespace {

// Model, text, cache, device and the sizes of the evaluation set: what must match, besides the
// layer, for a session opened with `a` to serve `b`.
bool sameSource(const analysis::TextSessionOptions& a, const analysis::TextSessionOptions& b) {
  return a.model_path == b.model_path && a.data_spec == b.data_spec && a.cache_path == b.cache_path &&
         a.device == b.device && a.tokenizer == b.tokenizer && a.max_sequences == b.max_sequences &&
         a.validation_fraction == b.validation_fraction && a.n_head == b.n_head;
}

}  // namespace

analysis::TextAnalysisSession& TextSessionHost::session(const analysis::TextSessionOptions& options,
                                                        const std::function<bool()>& cancelled) {
  if (session_ && sameSource(options, session_->options()) &&
      (options.layer == session_->options().layer || options.layer == session_->layer_name() ||
       options.layer == std::to_string(session_->layer_index())))
    return *session_;
  // Close before opening: a GPT-2-sized model and its arrays are not held twice.
  session_.reset();
  const QString extracting = tr("Extracting tokens");
  session_ = analysis::TextAnalysisSession::open_extracted(options, [&](const analysis::ExtractionProgress& p) {
    worker_->postProgress(extracting, p.samples_done, p.samples_total, p.eta_seconds);
    return !cancelled();
  });
  ++opened_;
  return *session_;
}

void TextSessionHost::release() { session_.reset(); }

}  // namespace mumoe::ui
