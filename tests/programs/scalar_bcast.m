function [B, C] = scalar_bcast(A, c)
  % scalar broadcasting is maintained: the delta of A + c is the delta of A
  % test inputs: A=randn(5,5) c=0.3
  B = (A + c) * (A - 1);
  C = 2 - A' + c;
end
