"""Mirrors the PyTorch NLP tutorial "Word Embeddings: Encoding Lexical Semantics"
(https://pytorch.org/tutorials/beginner/nlp/word_embeddings_tutorial.html): an
nn.Embedding looked up with a LongTensor, an N-gram language model (embeddings
viewed as one row, Linear, F.relu, F.log_softmax) trained by SGD with NLLLoss,
the total loss summed with loss.item(), and one word's embedding read back."""
from script_data import set_weights

TOLERANCE = dict(rtol=1e-3, atol=1e-5)


def main(torch, workdir):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    word_to_ix = {"hello": 0, "world": 1}
    embeds = set_weights(torch, nn.Embedding(2, 5), seed=41, scale=1.0)
    lookup_tensor = torch.tensor([word_to_ix["hello"]], dtype=torch.long)
    hello_embed = embeds(lookup_tensor)
    print(hello_embed)

    CONTEXT_SIZE, EMBEDDING_DIM = 2, 10
    test_sentence = """When forty winters shall besiege thy brow, And dig deep trenches in thy
    beauty's field, Thy youth's proud livery so gazed on now, Will be a totter'd weed of small
    worth held: Then being asked, where all thy beauty lies, Where all the treasure of thy
    lusty days;""".split()
    ngrams = [([test_sentence[i - j - 1] for j in range(CONTEXT_SIZE)], test_sentence[i])
              for i in range(CONTEXT_SIZE, len(test_sentence))]
    vocab = sorted(set(test_sentence))
    word_to_ix = {word: i for i, word in enumerate(vocab)}

    class NGramLanguageModeler(nn.Module):
        def __init__(self, vocab_size, embedding_dim, context_size):
            super(NGramLanguageModeler, self).__init__()
            self.embeddings = nn.Embedding(vocab_size, embedding_dim)
            self.linear1 = nn.Linear(context_size * embedding_dim, 32)
            self.linear2 = nn.Linear(32, vocab_size)

        def forward(self, inputs):
            embeds = self.embeddings(inputs).view((1, -1))
            out = F.relu(self.linear1(embeds))
            out = self.linear2(out)
            log_probs = F.log_softmax(out, dim=1)
            return log_probs

    losses = []
    loss_function = nn.NLLLoss()
    model = set_weights(torch, NGramLanguageModeler(len(vocab), EMBEDDING_DIM, CONTEXT_SIZE), seed=42)
    optimizer = optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(5):
        total_loss = 0
        for context, target in ngrams:
            context_idxs = torch.tensor([word_to_ix[w] for w in context], dtype=torch.long)
            model.zero_grad()
            log_probs = model(context_idxs)
            loss = loss_function(log_probs, torch.tensor([word_to_ix[target]], dtype=torch.long))
            loss.backward()
            optimizer.step()
            total_loss += loss.item()
        losses.append(total_loss)
    print(losses)
    print(model.embeddings.weight[word_to_ix["beauty"]])
    assert losses[-1] < losses[0]
    return dict(hello=hello_embed, losses=losses, beauty=model.embeddings.weight[word_to_ix["beauty"]])
