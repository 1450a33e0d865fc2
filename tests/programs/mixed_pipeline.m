function [beta, s, nrm] = mixed_pipeline(X, y)
  % maintained regression next to re-evaluated statistics
  % test inputs: X=randn(25,4) y=randn(25,1)
  G = X' * X;
  beta = G \ (X' * y);
  s = max(abs(beta));
  nrm = norm(G, 1) + norm(G) + norm(G, 'fro');
end
